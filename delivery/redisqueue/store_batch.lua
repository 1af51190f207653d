-- Stores a batch: consecutive sent messages, all or none, as store_sent.lua
-- would one after the other, then confirmations, as store_confirmed.lua
-- would (see durable.BatchQueue.StoreBatch).
-- KEYS[1] meta hash, KEYS[2] confirmed hash, KEYS[3] qualifiers set,
-- KEYS[3+i] the sorted set of the i-th qualifier the batch names
-- ARGV: the qualifiers' names, one per KEYS[3+i]; then the number of sent
-- messages, the first one's seqNr and its qualifier index i; the chunked
-- message the batch leaves partial (the seqNr of its first chunk, 0 for
-- none, -1 to leave that as it was) and its qualifier index; the number of
-- members (see record.go), and for each: record, qualifier index i, score;
-- then the number of confirmations, and for each: seqNr, qualifier index i,
-- unix milliseconds; last, the epoch of the caller (0: a queue value that
-- never loaded, unfenced).
-- Refuses everything with the error "FENCED <epoch>" when the caller's
-- epoch is not the queue's (another controller loaded it since).
-- Returns 1 when the messages are stored (or there are none), 0 when they
-- already were (the last one is current - 1), and -current otherwise; the
-- confirmations are stored unless it returns -current.
local epoch = ARGV[#ARGV]
if epoch ~= '0' then
  local now = redis.call('HGET', KEYS[1], 'incarnation') or '0'
  if now ~= epoch then
    return redis.error_reply('FENCED ' .. now)
  end
end
local nq = #KEYS - 3
local at = nq + 1
local ns = tonumber(ARGV[at])
local first = tonumber(ARGV[at + 1])
local firstQual = tonumber(ARGV[at + 2])
local leaves = tonumber(ARGV[at + 3])
local leavesQual = ARGV[tonumber(ARGV[at + 4])]
local nm = tonumber(ARGV[at + 5])
at = at + 6
local result = 1
if ns > 0 then
  local cur = tonumber(redis.call('HGET', KEYS[1], 'current') or '1')
  local partial = tonumber(redis.call('HGET', KEYS[1], 'partialFrom') or '0')
  local last = first + ns - 1
  if partial > 0 and first == partial and redis.call('HGET', KEYS[1], 'partialQualifier') == ARGV[firstQual] then
    -- The producer died while storing a chunked message and starts it
    -- again. Every member from its first chunk on is one of its chunks.
    redis.call('ZREMRANGEBYSCORE', KEYS[3 + firstQual], ARGV[nq + 2], '+inf')
    redis.call('HDEL', KEYS[1], 'partialFrom', 'partialQualifier')
    partial, cur = 0, first
  end
  if first == cur then
    local used = {}
    for k = 1, nm do
      local i = tonumber(ARGV[at + 1])
      redis.call('ZADD', KEYS[3 + i], ARGV[at + 2], ARGV[at])
      used[i] = true
      at = at + 3
    end
    for i in pairs(used) do
      redis.call('SADD', KEYS[3], ARGV[i])
    end
    redis.call('HSET', KEYS[1], 'current', string.format('%.0f', last + 1))
    if leaves > 0 then
      redis.call('HSET', KEYS[1], 'partialFrom', string.format('%.0f', leaves), 'partialQualifier', leavesQual)
    elseif leaves == 0 and partial > 0 then
      redis.call('HDEL', KEYS[1], 'partialFrom', 'partialQualifier')
    end
  elseif last == cur - 1 then
    result = 0
    at = at + 3 * nm
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
    -- A group goes when its last message is confirmed; a qualifier
    -- (a worker, an entity) with nothing left goes too.
    local key = KEYS[3 + tonumber(ARGV[at + 1])]
    redis.call('ZREMRANGEBYSCORE', key, '-inf', seq)
    if qual ~= '' and redis.call('EXISTS', key) == 0 then
      redis.call('SREM', KEYS[3], qual)
      redis.call('HDEL', KEYS[2], qual)
    end
  end
  at = at + 3
end
if top > highest then
  redis.call('HSET', KEYS[1], 'highest', string.format('%.0f', top))
end
return result
