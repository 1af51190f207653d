-- fence_holds(record, inc, epoch): true while the shard record at key
-- record names incarnation inc as its owner at epoch epoch (both strings).
-- A state write in the shard's slot checks it first and refuses when false.
local function fence_holds(record, inc, epoch)
	local f = redis.call('HMGET', record, 'inc', 'epoch')
	return f[1] == inc and f[2] == epoch
end
