package timers

import "github.com/redis/go-redis/v9"

// The Redis store's scripts. Every change that touches more than one key
// (or reads then writes) is one script, so Redis runs it with nothing in
// between: that is what makes the limit, the claim and the generation
// checks atomic across instances.
//
// Times are integer milliseconds. A script's "now" is ARGV[1]: the
// injected clock's time, or "" to read Redis TIME, the one clock every
// instance shares (rounded up when it sets a due time, down when it
// decides due-ness, so nothing is ever claimed early, not even by a
// fraction of a millisecond). Numbers cross the Lua boundary as decimal
// strings, formatted with %.0f: Lua numbers are doubles and tostring
// would switch to exponent notation.
//
// A record (the value in the data hash) is
//
//	generation:createdMs:maxRetries:dueMs:attempts:lastAttemptMs:errLen:<err><call>
//
// six decimal fields, the error's length, the error, then the call's
// stored form. One string per timer rather than a hash per timer: a
// 1 KB call would turn a small hash into a real hash table, and every
// Redis key costs its own overhead on top (see the memory figures in
// doc.go). A record is written once, when its timer is created. What
// changes as the timer runs is its state (the value in the state hash):
//
//	generation:dueMs:attempts:lastAttemptMs:errLen:<err>
//
// which, when there is one of the record's generation, overrides the
// record's header; a timer that never ran has none. So a claim, a
// completion or a retry reads and writes a few dozen bytes, not the
// 1 KB record (it reads the record's header only for a timer without a
// state, and copies the record through to the claim's reply). Records
// that earlier versions rewrote in place (attempts in the header, no
// state) read the same way.
const luaPrelude = `
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
-- stateOf is the state of a timer whose record is rec and whose state is
-- st (false when it has none): nil for a corrupt record.
local function stateOf(rec, st)
	local gen, _, _, due, att, last, elen, pos =
		string.match(rec, '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):()')
	if not gen then return nil end
	if st then
		local sgen, sdue, satt, slast, selen, spos = string.match(st, '^(%d+):(%d+):(%d+):(%d+):(%d+):()')
		if sgen == gen then
			selen = tonumber(selen)
			return {gen = gen, due = sdue, att = tonumber(satt), last = slast, err = string.sub(st, spos, spos + selen - 1)}
		end
	end
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
`

// Every script runs on one partition: it gets KEYS[1] the partition's due
// sorted set, KEYS[2] its data hash, KEYS[3] its failing set, KEYS[4] its
// state hash; more keys (of the same partition) are listed per script.
var (
	// createTimerWithLimit: KEYS[5] generation counter, KEYS[6…] the data
	// hashes of other partitions to count here (on one Redis: all of
	// them); ARGV[1] now, ARGV[2] delayMs, ARGV[3] maxActive, ARGV[4]
	// maxRetries, ARGV[5] name, ARGV[6] stored call, ARGV[7] wake channel,
	// ARGV[8] the number of timers in the other partitions not in KEYS
	// (counted by the caller), ARGV[9] the partition's index.
	// Replaces a timer of the same name (which therefore does not count
	// against the limit), and publishes the due time on the wake channel
	// when the new timer is now the earliest, so that sleeping loops on
	// other instances re-plan. Returns {'ok', gen, nowMs, dueMs} or
	// {'limit', active}.
	createTimerWithLimit = redis.NewScript(luaPrelude + `
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
`)

	// claimDueTimers: KEYS[5] marker; ARGV[1] now, ARGV[2] max (may be
	// 0), ARGV[3] leaseMs. Takes up to max timers due by now, counts the
	// attempt in their states, and moves each to now+lease in the sorted
	// set: that is the lease. An instance that never reports lets it
	// expire, and the timer is due again for everyone. Returns {nowMs,
	// waitMs, markerExists, name, record, state, leaseExpired, …}; waitMs
	// is until the earliest remaining score, -1 when there is none.
	// leaseExpired is 1 when the timer's score was past its due time:
	// every write but a claim puts the score at the due time, so that is a
	// lease that ran out.
	claimDueTimers = redis.NewScript(luaPrelude + `
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
	local recs = callMany('HMGET', KEYS[2], names)
	local states = callMany('HMGET', KEYS[4], names)
	local leased = fmt(now + tonumber(ARGV[3]))
	local nowText = fmt(now)
	local written, leases, corrupt = {}, {}, {}
	local w, o = 0, #out
	for k, name in ipairs(names) do
		local rec, st, dueMs = recs[k], states[k], nil
		-- A timer's first claim (no state, and a record as create writes
		-- it: no attempt, no error) takes only its generation and due time.
		if rec and not st then
			local gen, d = string.match(rec, '^(%d+):%d+:%d+:(%d+):0:0:0:')
			if gen then
				dueMs, st = d, gen .. ':' .. d .. ':1:' .. nowText .. ':0:'
			end
		end
		if not dueMs then
			local r = rec and stateOf(rec, st)
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
			out[o + 1], out[o + 2], out[o + 3] = name, rec, st
			out[o + 4] = (tonumber(due[2 * k]) > tonumber(dueMs)) and 1 or 0
			o = o + 4
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
`)

	// completeTimers: ARGV pairs of name, generation. Removes each timer
	// whose generation still matches: a replaced timer has a new one, so
	// the old run's success cannot delete it. Returns 1 or 0 per pair.
	completeTimers = redis.NewScript(luaPrelude + `
local names = {}
for i = 1, #ARGV, 2 do names[#names + 1] = ARGV[i] end
local states = callMany('HMGET', KEYS[4], names)
local out, gone = {}, {}
for k, name in ipairs(names) do
	local ok = 0
	if genOf(name, states[k]) == ARGV[2 * k] then
		gone[#gone + 1] = name
		ok = 1
	end
	out[k] = ok
end
forgetMany(gone)
return out
`)

	// rescheduleFailedTimers: ARGV[1] now, then groups of name,
	// generation, attempt, retryAfterMs ('-1': give up and remove), error.
	// Only the timer's current attempt may reschedule it: a run whose
	// lease expired and was claimed again (attempt moved on), or whose
	// timer was replaced (generation moved on), changes nothing. Returns
	// per group 0 (stale), 1 (rescheduled) or 2 (gave up, removed).
	rescheduleFailedTimers = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1], false)
local out = {}
for i = 2, #ARGV, 5 do
	local name = ARGV[i]
	local rec = redis.call('HGET', KEYS[2], name)
	local r = rec and stateOf(rec, redis.call('HGET', KEYS[4], name))
	local res = 0
	if r and r.gen == ARGV[i + 1] and fmt(r.att) == ARGV[i + 2] then
		if ARGV[i + 3] == '-1' then
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
`)

	// releaseTimers: ARGV[1] now, then triples of name, generation,
	// attempt. Makes each still-current attempt due now again, without
	// recording a failure: a stopping instance hands its work back. Returns
	// 1 or 0 per triple: released, or no longer that attempt.
	releaseTimers = redis.NewScript(luaPrelude + `
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
`)

	// deleteTimer: ARGV[1] name. Removes it from all four keys.
	deleteTimer = redis.NewScript(luaPrelude + `
forget(ARGV[1])
return 1
`)

	// countTimers: ARGV[1] now, ARGV[2] horizonMs. Returns {active,
	// failing, due within the horizon}, read at one instant.
	countTimers = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1], false)
return {redis.call('ZCARD', KEYS[1]), redis.call('SCARD', KEYS[3]),
	redis.call('ZCOUNT', KEYS[1], '-inf', fmt(now + tonumber(ARGV[2])))}
`)
)
