-- Delete a dead event for good.
-- KEYS: dead, byid, deadinfo
-- ARGV: id, dead blob the caller found
-- Returns 1 dropped, 0 not dead (any more)
if redis.call('ZREM', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
