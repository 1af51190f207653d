-- Applied records (entities.Applied) in an entity's own hash, written in
-- the same script as its state:
--   a:<key>        '<expires ms>|<answer>'   the record of command key <key>
--   q<c>:<n>       <key>                     class <c>'s n-th record, in the
--   q<c><, q<c>>   head and tail of the queue order they were made (and expire)
--   q<c>$          the expiry of class <c>'s latest record
-- <key> starts with its class ('k' or 'i'); one retention per class, so a
-- class's queue is in the order of expiry and its head is the next to go.

-- applied_now: Redis's clock in milliseconds.
local function applied_now()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- applied_expires: a record's expiry.
local function applied_expires(v)
	return tonumber(string.sub(v, 1, string.find(v, '|', 1, true) - 1))
end

-- applied_find: the answer recorded for key in hash h, unless it expired.
local function applied_find(h, key, now)
	local v = redis.call('HGET', h, 'a:' .. key)
	if not v or applied_expires(v) <= now then return nil end
	return string.sub(v, string.find(v, '|', 1, true) + 1)
end

-- applied_first: Redis's clock (nil when key is '', for no record) and
-- the answer recorded for key in hash h, if one is kept.
local function applied_first(h, key)
	if key == '' then return nil, nil end
	local now = applied_now()
	return now, applied_find(h, key, now)
end

-- applied_trim: drop up to max of class c's expired records, oldest
-- first, from the queue's head to its tail; returns the new head.
local function applied_trim(h, c, head, tail, now, max)
	local n = 0
	while head < tail and n < max do
		local qf = 'q' .. c .. ':' .. (head + 1)
		local key = redis.call('HGET', h, qf)
		if key then
			local v = redis.call('HGET', h, 'a:' .. key)
			if v and applied_expires(v) > now then break end
			if v then redis.call('HDEL', h, 'a:' .. key) end
			redis.call('HDEL', h, qf)
		end
		head, n = head + 1, n + 1
	end
	return head
end

-- applied_record: record key's answer in hash h for ttl ms, trimming a
-- few of its class's expired records first (more than one per record, so
-- trimming keeps up). The queue's ends are read in one call and written
-- with the record in another.
local function applied_record(h, key, answer, ttl, now)
	local c = string.sub(key, 1, 1)
	local ends = redis.call('HMGET', h, 'q' .. c .. '<', 'q' .. c .. '>')
	local head, tail = tonumber(ends[1] or '0'), tonumber(ends[2] or '0')
	local trimmed = applied_trim(h, c, head, tail, now, 3)
	tail = tail + 1
	local expires = now + tonumber(ttl)
	local fields = {'a:' .. key, expires .. '|' .. answer, 'q' .. c .. ':' .. tail, key,
		'q' .. c .. '$', expires, 'q' .. c .. '>', tail}
	if trimmed ~= head then
		fields[#fields + 1], fields[#fields + 2] = 'q' .. c .. '<', trimmed
	end
	redis.call('HSET', h, unpack(fields))
end

-- applied_linger: after the state left hash h, keep the hash as long as
-- its latest record, or delete it when it holds none.
local function applied_linger(h, now)
	local last = redis.call('HMGET', h, 'qk$', 'qi$')
	local expires = math.max(tonumber(last[1] or '0'), tonumber(last[2] or '0'))
	if expires > now then
		redis.call('PEXPIREAT', h, expires)
	else
		redis.call('DEL', h)
	end
end
