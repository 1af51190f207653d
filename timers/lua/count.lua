local now = now_ms(ARGV[1], false)
return {redis.call('ZCARD', KEYS[1]), redis.call('SCARD', KEYS[3]),
	redis.call('ZCOUNT', KEYS[1], '-inf', fmt(now + tonumber(ARGV[2]))), redis.call('HLEN', KEYS[5])}
