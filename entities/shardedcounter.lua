-- raise_counter(key, floor): set the decimal counter at key to floor if it
-- is below it (compared as decimal strings, never as Lua numbers).
local function raise_counter(key, floor)
	local c = redis.call('GET', key) or '0'
	if #c < #floor or (#c == #floor and c < floor) then
		redis.call('SET', key, floor)
	end
end
