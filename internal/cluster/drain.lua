-- drain: mark a member as leaving, if the key is still its incarnation's:
-- the others stop preferring it and take its shards as it releases them.
-- KEYS[1] member key
-- ARGV[1] incarnation
-- Returns 1, or 0 when the key is gone or another incarnation's.
if redis.call('HGET', KEYS[1], 'inc') ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'leaving', '1')
return 1
