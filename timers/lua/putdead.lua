local rec = build({gen = fmt(redis.call('INCR', KEYS[7])), created = ARGV[2], maxr = ARGV[3], due = ARGV[4],
	att = tonumber(ARGV[5]), last = ARGV[6], err = ARGV[7], call = ARGV[8]})
redis.call('HSET', KEYS[5], ARGV[1], ARGV[9] .. ':' .. rec)
redis.call('ZADD', KEYS[6], ARGV[9], ARGV[1])
return 1
