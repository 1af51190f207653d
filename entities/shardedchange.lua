-- record_change(keys, type, id, rev, data, limit): append a change to the
-- shard's log if a consumer registered there (its checkpoints hash
-- exists). keys = {checkpoints hash, change counter, log stream}; data is
-- false for a delete. The entry's id is <seq>-0, seq the next value of
-- the shard's change counter, so the log has no gap a reader cannot see;
-- MAXLEN ~ limit bounds it. 'a' is Redis's TIME in microseconds.
local function record_change(keys, type, id, rev, data, limit)
	if redis.call('EXISTS', keys[1]) == 0 then return end
	local seq = redis.call('INCR', keys[2])
	local t = redis.call('TIME')
	local at = t[1] .. string.format('%06d', t[2])
	if data then
		redis.call('XADD', keys[3], 'MAXLEN', '~', limit, seq .. '-0', 't', type, 'i', id, 'r', rev, 'a', at, 'd', data)
	else
		redis.call('XADD', keys[3], 'MAXLEN', '~', limit, seq .. '-0', 't', type, 'i', id, 'r', rev, 'a', at)
	end
end
