-- sharded_save: write an entity's state under its shard's fence.
-- KEYS[1] shard record, KEYS[2] state hash, KEYS[3] the shard's revision counter,
-- KEYS[4..6] the shard's checkpoints hash, change counter and change log
-- ARGV[1] fence incarnation, ARGV[2] fence epoch, ARGV[3] expected revision
-- ('0': absent), ARGV[4] data, ARGV[5] floor: '' to compare the state hash
-- with ARGV[3]; otherwise the hash must be absent (the caller checked the
-- legacy key) and the counter is raised to at least the floor first.
-- ARGV[6] entity type, ARGV[7] entity id, ARGV[8] the log's limit: the
-- change is recorded with the state (record_change), ARGV[9] the write's
-- trace context ('' for none), ARGV[10] the applied record's key ('' for
-- none), ARGV[11] its answer, ARGV[12] its retention in ms (applied.lua).
-- Returns {0, ''} fenced, {4, answer} applied already (nothing written), {1, rev} written ({1, rev, seq, at} when the
-- change was recorded), {2, found} conflict, {3, '0'}
-- absent here (the caller checks the legacy key). Revisions stay decimal
-- strings (incr_decimal), never a Lua number.
if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then
	return {0, ''}
end
local now, first = applied_first(KEYS[2], ARGV[10])
if first then return {4, first} end
local found = redis.call('HGET', KEYS[2], 'rev') or '0'
if ARGV[5] == '' then
	if found ~= ARGV[3] then
		if found == '0' then return {3, '0'} end
		return {2, found}
	end
else
	if found ~= '0' then return {2, found} end
	raise_counter(KEYS[3], ARGV[5])
end
local rev = incr_decimal(KEYS[3])
if found == '0' then redis.call('PERSIST', KEYS[2]) end
redis.call('HSET', KEYS[2], 'data', ARGV[4], 'rev', rev)
if now then applied_record(KEYS[2], ARGV[10], ARGV[11], ARGV[12], now) end
local seq, at = record_change({KEYS[4], KEYS[5], KEYS[6]}, ARGV[6], ARGV[7], rev, ARGV[4], ARGV[8], ARGV[9])
if seq then return {1, rev, seq, at} end
return {1, rev}
