-- Records that a qualifier's messages up to a sequence number are confirmed
-- (see durable.Queue.StoreMessageConfirmed).
-- KEYS[1] meta hash, KEYS[2] confirmed hash, KEYS[3] the qualifier's sorted set
-- ARGV[1] seqNr, ARGV[2] qualifier, ARGV[3] timestamp in unix milliseconds
-- Returns 1 when recorded, 0 when an equal or higher one was.
local s = tonumber(ARGV[1])
local prev = redis.call('HGET', KEYS[2], ARGV[2])
if prev and tonumber(string.match(prev, '^(%d+)')) >= s then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1] .. ':' .. ARGV[3])
if s > tonumber(redis.call('HGET', KEYS[1], 'highest') or '0') then
  redis.call('HSET', KEYS[1], 'highest', ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])
return 1
