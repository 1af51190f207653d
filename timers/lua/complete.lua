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
