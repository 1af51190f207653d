-- acquire: make me the owner of a shard if its record is still as read.
-- KEYS[1] shard record
-- ARGV[1] expected owner incarnation ('' when free), ARGV[2] expected
-- epoch ('0' when never owned), ARGV[3] my id, ARGV[4] my incarnation
-- Returns {'1', new epoch} or {'0', epoch found}, all strings. The epoch grows by one on
-- every change of owner, never otherwise.
local f = redis.call('HMGET', KEYS[1], 'inc', 'epoch')
local inc, epoch = f[1] or '', f[2] or '0'
if inc ~= ARGV[1] or epoch ~= ARGV[2] then
	return {'0', epoch}
end
local next = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'inc', ARGV[4])
return {'1', string.format('%d', next)}
