-- The lease of a queue's owner (see lease.go). KEYS[1] meta hash, KEYS[2]
-- lease string. ARGV[1] the op: acquire, renew or release; ARGV[2] the
-- holder's token, ARGV[3] the lease in milliseconds, ARGV[4] the holder's
-- epoch (renew, release), or its name (acquire: '' for none).
-- acquire: {1, epoch} once the lease is taken (free, or the token's own):
-- the epoch (meta incarnation) moves on and the name is recorded (meta
-- holder); {0, pttl} while another holds it.
-- renew: 1 when the lease is extended (re-made if it lapsed and nobody took
-- over), 0 when the epoch moved on: the holder is deposed.
-- release: 1 when the lease was the holder's and is gone, 0 otherwise.
local op, token = ARGV[1], ARGV[2]
if op == 'acquire' then
  local holder = redis.call('GET', KEYS[2])
  if holder and holder ~= token then
    return {0, redis.call('PTTL', KEYS[2])}
  end
  local epoch = redis.call('HINCRBY', KEYS[1], 'incarnation', 1)
  redis.call('SET', KEYS[2], token, 'PX', ARGV[3])
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[1], 'holder', ARGV[4])
  else
    redis.call('HDEL', KEYS[1], 'holder')
  end
  return {1, epoch}
end
if redis.call('HGET', KEYS[1], 'incarnation') ~= ARGV[4] then
  return 0
end
if op == 'renew' then
  redis.call('SET', KEYS[2], token, 'PX', ARGV[3])
  return 1
end
if redis.call('GET', KEYS[2]) == token then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
