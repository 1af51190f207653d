-- Stores a batch: consecutive sent messages, all or none, as store_sent.lua
-- would one after the other, then confirmations, as store_confirmed.lua
-- would (see durable.BatchQueue.StoreBatch).
-- KEYS[1] meta hash, KEYS[2] confirmed hash, KEYS[3] qualifiers set,
-- KEYS[3+i] the sorted set of the i-th qualifier the batch names
-- ARGV: the qualifiers' names, one per KEYS[3+i]; then the number of sent
-- messages and the first one's seqNr, and for each: record, qualifier index
-- i, chunk kind (whole, first, middle or last); then the number of
-- confirmations, and for each: seqNr, qualifier index i, unix milliseconds.
-- Returns 1 when the messages are stored (or there are none), 0 when they
-- already were (the last one is current - 1), and -current otherwise; the
-- confirmations are stored unless it returns -current.
local nq = #KEYS - 3
local at = nq + 1
local ns = tonumber(ARGV[at])
local first = tonumber(ARGV[at + 1])
at = at + 2
local result = 1
if ns > 0 then
  local cur = tonumber(redis.call('HGET', KEYS[1], 'current') or '1')
  local partial = tonumber(redis.call('HGET', KEYS[1], 'partialFrom') or '0')
  local firstQual = ARGV[tonumber(ARGV[at + 1])]
  local last = first + ns - 1
  if partial > 0 and first == partial and redis.call('HGET', KEYS[1], 'partialQualifier') == firstQual then
    -- The producer died while storing a chunked message and starts it again.
    redis.call('ZREMRANGEBYSCORE', KEYS[3 + tonumber(ARGV[at + 1])], ARGV[at - 1], '+inf')
    redis.call('HDEL', KEYS[1], 'partialFrom', 'partialQualifier')
    partial, cur = 0, first
  end
  if first == cur then
    local used = {}
    -- The chunked message left partial by the batch: nil when the batch
    -- leaves it as it was (only middle chunks), false when none is.
    local partialFrom, partialQual = nil, nil
    for k = 0, ns - 1 do
      local i = tonumber(ARGV[at + 1])
      local s = first + k
      redis.call('ZADD', KEYS[3 + i], s, ARGV[at])
      used[i] = true
      local kind = ARGV[at + 2]
      if kind == 'first' then
        partialFrom, partialQual = s, ARGV[i]
      elseif kind ~= 'middle' then
        partialFrom = false
      end
      at = at + 3
    end
    for i in pairs(used) do
      redis.call('SADD', KEYS[3], ARGV[i])
    end
    redis.call('HSET', KEYS[1], 'current', string.format('%.0f', last + 1))
    if partialFrom then
      redis.call('HSET', KEYS[1], 'partialFrom', string.format('%.0f', partialFrom), 'partialQualifier', partialQual)
    elseif partialFrom == false then
      redis.call('HDEL', KEYS[1], 'partialFrom', 'partialQualifier')
    end
  elseif last == cur - 1 then
    result = 0
    at = at + 3 * ns
  else
    return -cur
  end
end
local nc = tonumber(ARGV[at])
at = at + 1
if nc == 0 then
  return result
end
local highest = tonumber(redis.call('HGET', KEYS[1], 'highest') or '0')
local top = highest
for k = 1, nc do
  local seq = ARGV[at]
  local s = tonumber(seq)
  local qual = ARGV[tonumber(ARGV[at + 1])]
  local prev = redis.call('HGET', KEYS[2], qual)
  if not (prev and tonumber(string.match(prev, '^(%d+)')) >= s) then
    redis.call('HSET', KEYS[2], qual, seq .. ':' .. ARGV[at + 2])
    if s > top then
      top = s
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[3 + tonumber(ARGV[at + 1])], '-inf', seq)
  end
  at = at + 3
end
if top > highest then
  redis.call('HSET', KEYS[1], 'highest', string.format('%.0f', top))
end
return result
