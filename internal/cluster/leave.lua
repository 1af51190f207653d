-- leave: delete a member's key if it is still this incarnation's, and
-- drop the id from the index unless another incarnation holds it.
-- KEYS[1] member key, KEYS[2] index
-- ARGV[1] id, ARGV[2] incarnation
-- Returns 1 when the key was this incarnation's, else 0.
local mine = redis.call('HGET', KEYS[1], 'inc') == ARGV[2]
if mine then
	redis.call('DEL', KEYS[1])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
	redis.call('SREM', KEYS[2], ARGV[1])
end
if mine then return 1 end
return 0
