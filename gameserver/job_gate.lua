-- Start a one-per-world job's run unless one started less than an interval ago (Redis clock,
-- so hosts with skewed clocks agree).
-- KEYS: the job's last start (ms)
-- ARGV: interval ms
-- Returns 0: run now (the start is recorded), else ms until the next run is due
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]))
if last and now - last < interval then return interval - (now - last) end
redis.call('SET', KEYS[1], now)
return 0
