-- sharded_delete: delete an entity's state under its shard's fence,
-- leaving nothing behind (the shard's counter keeps revisions growing).
-- KEYS[1] shard record, KEYS[2] state hash, KEYS[3] the shard's revision counter,
-- KEYS[4..6] the shard's checkpoints hash, change counter and change log
-- ARGV[1] fence incarnation, ARGV[2] fence epoch, ARGV[3] expected revision,
-- ARGV[4] floor ('' or a legacy revision the counter is raised to),
-- ARGV[5] entity type, ARGV[6] entity id, ARGV[7] the log's limit: a
-- delete of a present state is recorded with it (record_change), ARGV[8]
-- the write's trace context ('' for none), ARGV[9] the applied record's
-- key ('' for none), ARGV[10] its answer, ARGV[11] its retention in ms
-- (applied.lua): the records outlive the state, the hash kept as long as
-- its latest record.
-- Returns {0, ''} fenced, {4, answer} applied already (nothing written), {1, found} deleted (or absent as expected;
-- {1, found, seq, at} when the delete was recorded),
-- {2, found} conflict, {3, '0'} absent here but expected present (the
-- caller checks the legacy key).
if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then
	return {0, ''}
end
local now, first = applied_first(KEYS[2], ARGV[9])
if first then return {4, first} end
local found = redis.call('HGET', KEYS[2], 'rev') or '0'
if found ~= ARGV[3] then
	if found == '0' then return {3, '0'} end
	return {2, found}
end
if ARGV[4] ~= '' then raise_counter(KEYS[3], ARGV[4]) end
redis.call('HDEL', KEYS[2], 'data', 'rev')
now = now or applied_now()
if ARGV[9] ~= '' then applied_record(KEYS[2], ARGV[9], ARGV[10], ARGV[11], now) end
applied_linger(KEYS[2], now)
if found ~= '0' then
	local seq, at = record_change({KEYS[4], KEYS[5], KEYS[6]}, ARGV[5], ARGV[6], found, false, ARGV[7], ARGV[8])
	if seq then return {1, found, seq, at} end
end
return {1, found}
