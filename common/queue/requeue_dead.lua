-- Give a dead event another run, due now, with its attempts reset.
-- KEYS: due, byid, dead, deadinfo
-- ARGV: id, dead blob the caller found, new blob, now ms, wake channel, wake message
-- Returns 1 requeued, 0 not dead (any more)
if redis.call('ZREM', KEYS[3], ARGV[2]) == 0 then return 0 end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
if string.byte(ARGV[3], 36) == 100 then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
