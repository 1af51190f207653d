local name = ARGV[3]
local dead = redis.call('HGET', KEYS[5], name)
if not dead then return {'missing'} end
if redis.call('HEXISTS', KEYS[2], name) == 1 then return {'exists'} end
local maxr, elen, pos = string.match(dead, '^%d+:%d+:%d+:(%d+):%d+:%d+:%d+:(%d+):()')
if not maxr then return {'missing'} end
local call = string.sub(dead, pos + tonumber(elen))
local res = insert(KEYS[7], 8, ARGV[1], 0, ARGV[2], maxr, name, call, ARGV[4], ARGV[5], ARGV[6])
if res[1] == 'ok' then
	redis.call('HDEL', KEYS[5], name)
	redis.call('ZREM', KEYS[6], name)
	res[5], res[6] = maxr, call
end
return res
