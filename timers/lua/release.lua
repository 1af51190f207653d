local now = now_ms(ARGV[1], false)
local out = {}
for i = 2, #ARGV, 3 do
	local rec = redis.call('HGET', KEYS[2], ARGV[i])
	local r = rec and stateOf(rec, redis.call('HGET', KEYS[4], ARGV[i]))
	local ok = 0
	if r and r.gen == ARGV[i + 1] and fmt(r.att) == ARGV[i + 2] then
		r.due = fmt(now)
		redis.call('HSET', KEYS[4], ARGV[i], buildState(r))
		redis.call('ZADD', KEYS[1], r.due, ARGV[i])
		ok = 1
	end
	out[#out + 1] = ok
end
return out
