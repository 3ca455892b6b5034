-- Extend the lease of our node id. If Redis lost it (restart, FLUSHALL) or it expired and
-- nobody took it since, it is ours again.
-- KEYS: expiries, owners
-- ARGV: owner, ttl ms, node
-- Returns 1 (ours until now + ttl), or 0 when another live process holds it now.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = redis.call('HGET', KEYS[2], ARGV[3])
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[3])
if owner and owner ~= ARGV[1] and expiry and tonumber(expiry) > now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
return 1
