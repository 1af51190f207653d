local function fmt(n) return string.format('%.0f', n) end
local function now_ms(arg, round_up)
	if arg ~= '' then return tonumber(arg) end
	local t = redis.call('TIME')
	local ms = tonumber(t[1]) * 1000
	local us = tonumber(t[2])
	if round_up then return ms + math.ceil(us / 1000) end
	return ms + math.floor(us / 1000)
end
local function build(r)
	return table.concat({r.gen, r.created, r.maxr, r.due, fmt(r.att), r.last, fmt(#r.err), ''}, ':') .. r.err .. r.call
end
-- stateFrom is the state st parsed: nil when it does not parse.
local function stateFrom(st)
	local gen, due, att, last, elen, pos = string.match(st, '^(%d+):(%d+):(%d+):(%d+):(%d+):()')
	if not gen then return nil end
	return {gen = gen, due = due, att = tonumber(att), last = last, err = string.sub(st, pos, pos + tonumber(elen) - 1)}
end
-- stateOf is the state of a timer whose record is rec and whose state is
-- st (false when it has none): nil for a corrupt record.
local function stateOf(rec, st)
	local gen, _, _, due, att, last, elen, pos =
		string.match(rec, '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):()')
	if not gen then return nil end
	local s = st and stateFrom(st)
	if s and s.gen == gen then return s end
	elen = tonumber(elen)
	return {gen = gen, due = due, att = tonumber(att), last = last, err = string.sub(rec, pos, pos + elen - 1)}
end
local function buildState(r)
	return table.concat({r.gen, r.due, fmt(r.att), r.last, fmt(#r.err), ''}, ':') .. r.err
end
-- genOf is the generation of a timer: from its state st when it has one,
-- else from its record in the data hash (nil when there is none).
local function genOf(name, st)
	if st then return string.match(st, '^(%d+):') end
	local rec = redis.call('HGET', KEYS[2], name)
	return rec and string.match(rec, '^(%d+):')
end
-- current is the record and the state of timer name when it is at
-- generation gen and (unless att is '') attempt att; nil otherwise.
local function current(name, gen, att)
	local rec = redis.call('HGET', KEYS[2], name)
	local r = rec and stateOf(rec, redis.call('HGET', KEYS[4], name))
	if r and r.gen == gen and (att == '' or fmt(r.att) == att) then return rec, r end
	return nil
end
local function forget(name)
	redis.call('HDEL', KEYS[2], name)
	redis.call('HDEL', KEYS[4], name)
	redis.call('ZREM', KEYS[1], name)
	redis.call('SREM', KEYS[3], name)
end
-- callMany runs cmd on key with the values of list as its arguments, in
-- calls of at most 1,000 (an even number, so pairs stay whole: unpack has
-- a limit), and returns the replies' elements in order. One call for many
-- timers: each redis.call costs more than the command itself.
local function callMany(cmd, key, list)
	if #list == 0 then return {} end
	if #list <= 1000 then
		local r = redis.call(cmd, key, unpack(list))
		if type(r) == 'table' then return r end
		return {}
	end
	local out = {}
	for i = 1, #list, 1000 do
		local r = redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
		if type(r) == 'table' then
			for k = 1, #r do out[#out + 1] = r[k] end
		end
	end
	return out
end
local function forgetMany(names)
	if #names == 0 then return end
	callMany('HDEL', KEYS[2], names)
	callMany('HDEL', KEYS[4], names)
	callMany('ZREM', KEYS[1], names)
	callMany('SREM', KEYS[3], names)
end
-- deadRecord is the dead letter of a timer that gave up at now: its
-- record rec with the state r of its last attempt and its last error err,
-- after the time it died (layout in redisscripts.go).
local function deadRecord(rec, r, err, now)
	local created, maxr, elen, pos = string.match(rec, '^%d+:(%d+):(%d+):%d+:%d+:%d+:(%d+):()')
	local call = string.sub(rec, pos + tonumber(elen))
	return fmt(now) .. ':' .. build({gen = r.gen, created = created, maxr = maxr, due = r.due, att = r.att,
		last = r.last, err = err, call = call})
end
-- insert stores a new timer name, due delay ms from now, replacing one of
-- the same name, unless that would make more than maxActive timers: the
-- data hashes of the other partitions are KEYS[othersFrom…], plus others
-- counted by the caller. genKey is the partition's generation counter;
-- part its index, published on channel when the timer is the earliest.
-- at, when not '', is the due time instead; ifGen, when not '', the
-- generation the replaced timer must have ({'changed'}, or {'missing'}
-- when there is none).
-- Returns {'ok', gen, nowMs, dueMs} or {'limit', active}.
local function insert(genKey, othersFrom, nowArg, delay, maxActive, maxr, name, call, channel, others, part, at, ifGen)
	if ifGen and ifGen ~= '' then
		local g = genOf(name, redis.call('HGET', KEYS[4], name))
		if not g then return {'missing'} end
		if g ~= ifGen then return {'changed'} end
	end
	if redis.call('HEXISTS', KEYS[2], name) == 0 then
		local n = redis.call('HLEN', KEYS[2]) + tonumber(others)
		for i = othersFrom, #KEYS do n = n + redis.call('HLEN', KEYS[i]) end
		if n >= tonumber(maxActive) then return {'limit', n} end
	end
	local now = now_ms(nowArg, true)
	local due = now + delay
	if at and at ~= '' then due = tonumber(at) end
	local gen = redis.call('INCR', genKey)
	local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
	redis.call('HSET', KEYS[2], name, build({gen = fmt(gen), created = fmt(now), maxr = maxr, due = fmt(due),
		att = 0, last = '0', err = '', call = call}))
	redis.call('HSET', KEYS[4], name, fmt(gen) .. ':' .. fmt(due) .. ':0:0:0:')
	redis.call('ZADD', KEYS[1], fmt(due), name)
	redis.call('SREM', KEYS[3], name)
	if first[2] == nil or due < tonumber(first[2]) then
		redis.call('PUBLISH', channel, part .. ':' .. fmt(due))
	end
	return {'ok', fmt(gen), fmt(now), fmt(due)}
end
