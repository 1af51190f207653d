-- renew: extend a member's lease, only while the key is its incarnation's.
-- KEYS[1] member key
-- ARGV[1] incarnation, ARGV[2] lease ms
-- Returns 1, or 0 when the key expired or belongs to another incarnation:
-- then this incarnation is dead for good (nothing writes it again).
if redis.call('HGET', KEYS[1], 'inc') ~= ARGV[1] then
	return 0
end
local t = redis.call('TIME')
local beat = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], 'beat', beat)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
