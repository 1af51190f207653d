-- release: clear a shard's owner if it is still me at my epoch. The epoch
-- stays: the next acquire adds one to it.
-- KEYS[1] shard record
-- ARGV[1] my incarnation, ARGV[2] my epoch
-- Returns 1, or 0 when the record has changed.
local f = redis.call('HMGET', KEYS[1], 'inc', 'epoch')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then
	return 0
end
redis.call('HSET', KEYS[1], 'owner', '', 'inc', '')
return 1
