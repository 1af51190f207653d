-- incr_decimal(key): INCR key and return the new value as a decimal
-- string. INCR's reply reaches Lua as a double, exact below 2^53, where
-- string.format('%d') writes it exactly (tostring and .. would write
-- 1e+14 from 10^14 on); past it, the stored string is read back.
local function incr_decimal(key)
	local n = redis.call('INCR', key)
	if n < 9007199254740992 then return string.format('%d', n) end
	return redis.call('GET', key)
end

-- record_change(keys, type, id, rev, data, limit, tc): append a change to
-- the shard's log if a consumer registered there (its checkpoints hash
-- exists). keys = {checkpoints hash, change counter, log stream}; data is
-- false for a delete; tc is the write's trace context ('' for none, and
-- then no field). The entry's id is <seq>-0, seq the next value of the
-- shard's change counter, so the log has no gap a reader cannot see;
-- MAXLEN ~ limit bounds it. 'a' is Redis's TIME in microseconds.
-- Returns the change's seq and time as strings, or nothing when no
-- consumer registered (nothing recorded).
local function record_change(keys, type, id, rev, data, limit, tc)
	if redis.call('EXISTS', keys[1]) == 0 then return end
	local seq = incr_decimal(keys[2])
	local t = redis.call('TIME')
	local at = t[1] .. string.format('%06d', t[2])
	local args = {'XADD', keys[3], 'MAXLEN', '~', limit, seq .. '-0', 't', type, 'i', id, 'r', rev, 'a', at}
	if data then
		args[#args + 1], args[#args + 2] = 'd', data
	end
	if tc and tc ~= '' then
		args[#args + 1], args[#args + 2] = 'c', tc
	end
	redis.call(unpack(args))
	return seq, at
end
