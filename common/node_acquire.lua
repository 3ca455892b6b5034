-- Lease a free node id for a process: the first one not leased, from `start` on (mod count).
-- Times come from the Redis server clock, so hosts with skewed clocks still agree on expiry.
-- KEYS: expiries (sorted set node -> lease expiry ms), owners (hash node -> owner)
-- ARGV: owner, ttl ms, node count, start
-- Returns the node, or -1 when every node is leased.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local count, start = tonumber(ARGV[3]), tonumber(ARGV[4])
for _, node in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('HDEL', KEYS[2], node)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= count then return -1 end
for i = 0, count - 1 do
  local node = (start + i) % count
  if not redis.call('ZSCORE', KEYS[1], node) then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), node)
    redis.call('HSET', KEYS[2], node, ARGV[1])
    return node
  end
end
return -1
