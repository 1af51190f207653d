-- journal_append: append an event-sourced entity's events (JournalStore.Append).
-- KEYS[1] the journal's head hash (seq, del, snap, snapseq, snapat),
-- KEYS[2] its events stream (entry id <seq>-0; n name, d data, a at in ms);
-- on a ShardedRedisStore also KEYS[3] the shard record and KEYS[4..6] the
-- shard's checkpoints hash, change counter and change log (record_change).
-- ARGV[1] fence incarnation, ARGV[2] fence epoch (ignored without KEYS[3]),
-- ARGV[3] expected seq, ARGV[4] the new head seq, ARGV[5] '1' to delete,
-- ARGV[6] trim through ('0': none), ARGV[7] snapshot seq ('': none),
-- ARGV[8] its data, ARGV[9] its time in ms, ARGV[10] entity type,
-- ARGV[11] entity id, ARGV[12] the log's limit, ARGV[13] trace context,
-- ARGV[14] n, the number of applied records (applied.lua), then 3 per
-- record: key, answer, retention in ms; then 4 per event: seq, name,
-- data, at in ms.
-- Returns {0} fenced, {4, answer} a record's key kept already (nothing
-- written), {2, found} conflict, {5, found} deleted, or {1, seq1,
-- at1, seq2, at2, ...}: the changes recorded, in order (none when no
-- consumer registered on the shard). Seqs stay decimal strings.
local logged = #KEYS > 2
if logged and not fence_holds(KEYS[3], ARGV[1], ARGV[2]) then
	return {0}
end
local records = tonumber(ARGV[14])
local now
for i = 15, 14 + 3 * records, 3 do
	local first
	now, first = applied_first(KEYS[1], ARGV[i])
	if first then return {4, first} end
end
local head = redis.call('HMGET', KEYS[1], 'seq', 'del')
local found = head[1] or '0'
if found ~= ARGV[3] then return {2, found} end
if head[2] then return {5, found} end
local out = {1}
local function logged_change(rev, data)
	local seq, at = record_change({KEYS[4], KEYS[5], KEYS[6]}, ARGV[10], ARGV[11], rev, data, ARGV[12], ARGV[13])
	if seq then
		out[#out + 1], out[#out + 2] = seq, at
	end
end
for i = 15 + 3 * records, #ARGV, 4 do
	redis.call('XADD', KEYS[2], ARGV[i] .. '-0', 'n', ARGV[i + 1], 'd', ARGV[i + 2], 'a', ARGV[i + 3])
	if logged then
		logged_change(ARGV[i], '{"name":"' .. ARGV[i + 1] .. '","data":' .. ARGV[i + 2] .. '}')
	end
end
redis.call('HSET', KEYS[1], 'seq', ARGV[4])
if ARGV[7] ~= '' then
	redis.call('HSET', KEYS[1], 'snap', ARGV[8], 'snapseq', ARGV[7], 'snapat', ARGV[9])
end
if ARGV[5] == '1' then
	redis.call('HSET', KEYS[1], 'del', '1')
	if logged then logged_change(ARGV[4], false) end
end
for i = 15, 14 + 3 * records, 3 do
	applied_record(KEYS[1], ARGV[i], ARGV[i + 1], ARGV[i + 2], now)
end
if ARGV[6] ~= '0' then
	-- Ids are <seq>-0: MINID <through>-1 trims through it, with no
	-- arithmetic on a Lua number (inexact past 2^53, written 1e+14 from 10^14).
	redis.call('XTRIM', KEYS[2], 'MINID', ARGV[6] .. '-1')
end
return out
