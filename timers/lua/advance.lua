local now = now_ms(ARGV[1], false)
local out = {}
for i = 2, #ARGV, 7 do
	local name = ARGV[i]
	local rec, r = current(name, ARGV[i + 1], ARGV[i + 2])
	local res = 0
	if rec then
		local created, maxr, elen, pos = string.match(rec, '^%d+:(%d+):(%d+):%d+:%d+:%d+:(%d+):()')
		local call = string.sub(rec, pos + tonumber(elen))
		local slen, spos = string.match(call, '^\2(%d+):()')
		if slen then call = string.sub(call, spos + tonumber(slen)) end
		if ARGV[i + 5] ~= '' then
			redis.call('HSET', KEYS[5], ARGV[i + 5], fmt(now) .. ':' .. build({gen = r.gen, created = created,
				maxr = maxr, due = r.due, att = r.att, last = r.last, err = ARGV[i + 6], call = call}))
			redis.call('ZADD', KEYS[6], fmt(now), ARGV[i + 5])
		end
		if ARGV[i + 3] == '' then
			forget(name)
			res = 2
		else
			local spec = ARGV[i + 4]
			local gen = fmt(redis.call('INCR', KEYS[7]))
			redis.call('HSET', KEYS[2], name, build({gen = gen, created = created,
				maxr = maxr, due = ARGV[i + 3], att = 0, last = '0', err = '', call = '\2' .. #spec .. ':' .. spec .. call}))
			redis.call('HSET', KEYS[4], name, gen .. ':' .. ARGV[i + 3] .. ':0:0:0:')
			redis.call('ZADD', KEYS[1], ARGV[i + 3], name)
			redis.call('SREM', KEYS[3], name)
			res = 1
		end
	end
	out[#out + 1] = res
end
return out
