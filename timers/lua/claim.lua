local marker = redis.call('EXISTS', KEYS[5])
local now = now_ms(ARGV[1], false)
local due = {}
if tonumber(ARGV[2]) > 0 then
	due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
end
local out = {fmt(now), '-1', marker}
if #due > 0 then
	local names = {}
	for i = 1, #due, 2 do names[#names + 1] = due[i] end
	local states = callMany('HMGET', KEYS[4], names)
	-- Only a timer stored without a state (by an earlier version) has its
	-- record read here: a 1 KB string costs Redis more to bring into Lua
	-- (it hashes every byte) than the rest of the claim, so the caller
	-- reads the records itself.
	local legacy, recs = {}, {}
	for k, name in ipairs(names) do
		if not states[k] then legacy[#legacy + 1] = name end
	end
	if #legacy > 0 then
		local got = callMany('HMGET', KEYS[2], legacy)
		for i, name in ipairs(legacy) do recs[name] = got[i] end
	end
	local leased = fmt(now + tonumber(ARGV[3]))
	local nowText = fmt(now)
	local written, leases, corrupt = {}, {}, {}
	local w, o = 0, #out
	for k, name in ipairs(names) do
		local st, dueMs = states[k], nil
		-- A timer's first claim (a state as create writes it: no attempt,
		-- no error) takes only its generation and due time.
		local gen, d
		if st then gen, d = string.match(st, '^(%d+):(%d+):0:0:0:$') end
		if gen then
			dueMs, st = d, gen .. ':' .. d .. ':1:' .. nowText .. ':0:'
		else
			local r = (st and stateFrom(st)) or (not st and recs[name] and stateOf(recs[name], false))
			if r then
				r.att = r.att + 1
				r.last = nowText
				dueMs, st = r.due, buildState(r)
			end
		end
		if not dueMs then
			redis.log(redis.LOG_WARNING, 'trellis timers: dropping corrupt timer ' .. name)
			corrupt[#corrupt + 1] = name
		else
			written[w + 1], written[w + 2] = name, st
			leases[w + 1], leases[w + 2] = leased, name
			w = w + 2
			out[o + 1], out[o + 2] = name, st
			out[o + 3] = (tonumber(due[2 * k]) > tonumber(dueMs)) and 1 or 0
			o = o + 3
		end
	end
	if #written > 0 then
		callMany('HSET', KEYS[4], written)
		callMany('ZADD', KEYS[1], leases)
	end
	forgetMany(corrupt)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then out[2] = fmt(math.max(tonumber(first[2]) - now, 0)) end
return out
