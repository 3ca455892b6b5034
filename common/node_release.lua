-- Hand back our node id. It stays taken for `cooldown` ms more: a busy process may have made
-- ids a few ms ahead of the clock (4096 per ms at most), which its next holder must not repeat.
-- KEYS: expiries, owners
-- ARGV: owner, node, cooldown ms
-- Returns 1 released, 0 not ours (any more).
if redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
return 1
