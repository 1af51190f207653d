local now = now_ms(ARGV[1], false)
local out = {}
for i = 2, #ARGV, 5 do
	local name = ARGV[i]
	local rec, r = current(name, ARGV[i + 1], ARGV[i + 2])
	local res = 0
	if rec then
		if ARGV[i + 3] == '-1' then
			redis.call('HSET', KEYS[5], name, deadRecord(rec, r, ARGV[i + 4], now))
			redis.call('ZADD', KEYS[6], fmt(now), name)
			forget(name)
			res = 2
		else
			r.err = ARGV[i + 4]
			r.due = fmt(now + tonumber(ARGV[i + 3]))
			redis.call('HSET', KEYS[4], name, buildState(r))
			redis.call('ZADD', KEYS[1], r.due, name)
			redis.call('SADD', KEYS[3], name)
			res = 1
		end
	end
	out[#out + 1] = res
end
return out
