local name = ARGV[5]
if redis.call('HEXISTS', KEYS[2], name) == 0 then
	local n = redis.call('HLEN', KEYS[2]) + tonumber(ARGV[8])
	for i = 6, #KEYS do n = n + redis.call('HLEN', KEYS[i]) end
	if n >= tonumber(ARGV[3]) then return {'limit', n} end
end
local now = now_ms(ARGV[1], true)
local due = now + tonumber(ARGV[2])
local gen = redis.call('INCR', KEYS[5])
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('HSET', KEYS[2], name, build({gen = fmt(gen), created = fmt(now), maxr = ARGV[4], due = fmt(due),
	att = 0, last = '0', err = '', call = ARGV[6]}))
redis.call('HDEL', KEYS[4], name)
redis.call('ZADD', KEYS[1], fmt(due), name)
redis.call('SREM', KEYS[3], name)
if first[2] == nil or due < tonumber(first[2]) then
	redis.call('PUBLISH', ARGV[7], ARGV[9] .. ':' .. fmt(due))
end
return {'ok', fmt(gen), fmt(now), fmt(due)}
