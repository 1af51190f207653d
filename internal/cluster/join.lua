-- join: register a member with a fresh incarnation, unless the id is live.
-- KEYS[1] member key, KEYS[2] index
-- ARGV[1] id, ARGV[2] incarnation, ARGV[3] address, ARGV[4] lease ms
-- Returns 1, or 0 when the id's key exists (a live member has this id).
-- The join time and the first heartbeat are Redis's clock (ms).
if redis.call('EXISTS', KEYS[1]) == 1 then
	return 0
end
local t = redis.call('TIME')
local beat = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], 'addr', ARGV[3], 'inc', ARGV[2], 'beat', beat, 'joined', beat)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
