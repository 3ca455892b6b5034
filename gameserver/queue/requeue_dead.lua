-- Give a dead event another run, due now, with its attempts reset.
-- KEYS: due, payload, dead, deadinfo
-- ARGV: id, blob the caller read (compare-and-set), new blob, now ms, wake channel, wake message
-- Returns 1 requeued, 0 not dead, -3 the blob changed since it was read
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
if v ~= ARGV[2] then return -3 end
local m = string.sub(v, 1, 20)
if redis.call('ZREM', KEYS[3], m) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[4], m)
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
