-- record: record a command's answer alone, changing no state (applied.lua).
-- KEYS[1] the entity's hash (RedisStore's or ShardedRedisStore's layout);
-- ARGV[1] expected revision ('0': absent), ARGV[2] the record's key,
-- ARGV[3] its answer, ARGV[4] its retention in ms.
-- Returns {4, answer} applied already, {2, found} conflict, {1, found}
-- recorded. A hash with no state and no tombstone is kept only as long as
-- its latest record.
local now, first = applied_first(KEYS[1], ARGV[2])
if first then return {4, first} end
local found = redis.call('HGET', KEYS[1], 'rev') or '0'
if found ~= ARGV[1] then return {2, found} end
applied_record(KEYS[1], ARGV[2], ARGV[3], ARGV[4], now)
if found == '0' and redis.call('HEXISTS', KEYS[1], 'gone') == 0 then applied_linger(KEYS[1], now) end
return {1, found}
