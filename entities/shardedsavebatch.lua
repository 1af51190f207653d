-- sharded_save_batch: write several updates of one entity, in order, under
-- its shard's fence.
-- KEYS as sharded_save. ARGV[1] fence incarnation, ARGV[2] fence epoch,
-- ARGV[3] expected revision (the entity exists here), ARGV[4] entity type,
-- ARGV[5] entity id, ARGV[6] the log's limit, then each update's data and
-- trace context ('' for none). Each update gets its revision and, when a
-- consumer registered, its change (record_change); the state is the last.
-- Returns {0} fenced, {2, found} conflict (found '0': absent here), or {1,
-- rev, seq, at, rev, seq, at, ...}, an update's seq and at '' when its
-- change was not recorded.
if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then
	return {0}
end
local found = redis.call('HGET', KEYS[2], 'rev') or '0'
if found ~= ARGV[3] or found == '0' then
	return {2, found}
end
local out = {1}
local rev, data
for i = 7, #ARGV, 2 do
	data = ARGV[i]
	redis.call('INCR', KEYS[3])
	rev = redis.call('GET', KEYS[3])
	local seq, at = record_change({KEYS[4], KEYS[5], KEYS[6]}, ARGV[4], ARGV[5], rev, data, ARGV[6], ARGV[i + 1])
	local n = #out
	out[n + 1], out[n + 2], out[n + 3] = rev, seq or '', at or ''
end
redis.call('HSET', KEYS[2], 'data', data, 'rev', rev)
return out
