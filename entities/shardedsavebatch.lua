-- sharded_save_batch: write several updates of one entity, in order, under
-- its shard's fence.
-- KEYS as sharded_save. ARGV[1] fence incarnation, ARGV[2] fence epoch,
-- ARGV[3] expected revision (the entity exists here), ARGV[4] entity type,
-- ARGV[5] entity id, ARGV[6] the log's limit, then each update's data,
-- trace context ('' for none), applied record's key ('' for none), answer
-- and retention in ms (applied.lua). Each update gets its revision and, when a
-- consumer registered, its change (record_change); the state is the last.
-- Returns {0} fenced, {2, found} conflict (found '0': absent here), {4}
-- when an update's record is kept already (nothing written), or {1,
-- rev, seq, at, rev, seq, at, ...}, an update's seq and at '' when its
-- change was not recorded.
if not fence_holds(KEYS[1], ARGV[1], ARGV[2]) then
	return {0}
end
local found = redis.call('HGET', KEYS[2], 'rev') or '0'
if found ~= ARGV[3] or found == '0' then
	return {2, found}
end
local now
for i = 9, #ARGV, 5 do
	if ARGV[i] ~= '' then
		now = now or applied_now()
		if applied_find(KEYS[2], ARGV[i], now) then return {4} end
	end
end
local out = {1}
local rev, data
for i = 7, #ARGV, 5 do
	data = ARGV[i]
	if ARGV[i + 2] ~= '' then applied_record(KEYS[2], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], now) end
	rev = incr_decimal(KEYS[3])
	local seq, at = record_change({KEYS[4], KEYS[5], KEYS[6]}, ARGV[4], ARGV[5], rev, data, ARGV[6], ARGV[i + 1])
	local n = #out
	out[n + 1], out[n + 2], out[n + 3] = rev, seq or '', at or ''
end
redis.call('HSET', KEYS[2], 'data', data, 'rev', rev)
return out
