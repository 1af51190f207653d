-- members: list the live members, dropping the ids whose key expired.
-- KEYS[1] index
-- ARGV[1] the member key prefix (the key is the prefix and the id; same
-- slot as the index, by its hash tag)
-- Returns a flat list: id, address, incarnation, beat (ms), leaving ('1'
-- or '') per member.
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
	local f = redis.call('HMGET', ARGV[1] .. id, 'addr', 'inc', 'beat', 'leaving')
	if f[1] then
		out[#out + 1] = id
		out[#out + 1] = f[1]
		out[#out + 1] = f[2]
		out[#out + 1] = f[3]
		out[#out + 1] = f[4] or ''
	else
		redis.call('SREM', KEYS[1], id)
	end
end
return out
