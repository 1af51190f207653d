-- Stores one sent message if its sequence number is the queue's current one
-- (see durable.Queue.StoreMessageSent).
-- KEYS[1] meta hash, KEYS[2] the qualifier's sorted set, KEYS[3] qualifiers set
-- ARGV[1] seqNr, ARGV[2] record, ARGV[3] qualifier,
-- ARGV[4] chunk kind: whole, first, middle or last
-- Returns 1 when stored, 0 when it was already stored (seqNr = current - 1),
-- and -current for any other seqNr.
local s = tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[1], 'current') or '1')
local partial = tonumber(redis.call('HGET', KEYS[1], 'partialFrom') or '0')
if partial > 0 and s == partial and redis.call('HGET', KEYS[1], 'partialQualifier') == ARGV[3] then
  -- The producer died while storing a chunked message and starts it again.
  redis.call('ZREMRANGEBYSCORE', KEYS[2], ARGV[1], '+inf')
  redis.call('HDEL', KEYS[1], 'partialFrom', 'partialQualifier')
  cur = s
end
if s == cur then
  redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('HSET', KEYS[1], 'current', string.format('%.0f', s + 1))
  local kind = ARGV[4]
  if kind == 'first' then
    redis.call('HSET', KEYS[1], 'partialFrom', ARGV[1], 'partialQualifier', ARGV[3])
  elseif kind ~= 'middle' then
    redis.call('HDEL', KEYS[1], 'partialFrom', 'partialQualifier')
  end
  return 1
elseif s == cur - 1 then
  return 0
end
return -cur
