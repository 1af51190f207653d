local now = now_ms(ARGV[1], false)
local old = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', fmt(now - tonumber(ARGV[2])), 'LIMIT', 0, tonumber(ARGV[3]))
if #old > 0 then
	callMany('HDEL', KEYS[5], old)
	callMany('ZREM', KEYS[6], old)
end
return #old
