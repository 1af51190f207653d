-- view: read every live member for an operator, without writing anything.
-- KEYS[1] index
-- ARGV[1] the member key prefix (the key is the prefix and the id; same
-- slot as the index, by its hash tag)
-- Returns a flat list: Redis's time now (ms), then per live member: id,
-- address, incarnation, beat (ms), leaving ('1' or ''), joined (ms, ''
-- for a member that joined before joins recorded it), the key's time to
-- live (ms). An id whose key expired is left out.
local t = redis.call('TIME')
local out = {t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
	local key = ARGV[1] .. id
	local f = redis.call('HMGET', key, 'addr', 'inc', 'beat', 'leaving', 'joined')
	local ttl = redis.call('PTTL', key)
	if f[1] and ttl >= 0 then
		out[#out + 1] = id
		out[#out + 1] = f[1]
		out[#out + 1] = f[2] or ''
		out[#out + 1] = f[3] or '0'
		out[#out + 1] = f[4] or ''
		out[#out + 1] = f[5] or ''
		out[#out + 1] = tostring(ttl)
	end
end
return out
