-- replace: delete the other members registered at this member's address
-- that have stopped renewing: the earlier incarnations of a process
-- restarted in place (see sameaddr.go for the rule).
-- KEYS[1] index
-- ARGV[1] the member key prefix (the key is the prefix and the id; same
-- slot as the index, by its hash tag), ARGV[2] my id, ARGV[3] my
-- incarnation, ARGV[4] my address, ARGV[5] stale ms: a member whose last
-- heartbeat is at least this old (Redis's clock) has stopped renewing
-- Returns a flat list of strings: the ms until the next member at the
-- address becomes stale ('-1' when none is left, or when this member's
-- own key is gone: a dead member replaces no one), then the id and
-- incarnation of each member deleted.
local me = redis.call('HGET', ARGV[1] .. ARGV[2], 'inc')
if me ~= ARGV[3] then
	return {'-1'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = tonumber(ARGV[5])
local wait = -1
local out = {''}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
	if id ~= ARGV[2] then
		local key = ARGV[1] .. id
		local f = redis.call('HMGET', key, 'addr', 'inc', 'beat')
		if f[1] == ARGV[4] then
			local age = now - tonumber(f[3] or '0')
			if age >= stale then
				redis.call('DEL', key)
				redis.call('SREM', KEYS[1], id)
				out[#out + 1] = id
				out[#out + 1] = f[2] or ''
			elseif wait < 0 or stale - age < wait then
				wait = stale - age
			end
		end
	end
end
out[1] = tostring(wait)
return out
