-- Fixed-window counters: one INCR per limit, all in one round trip.
-- KEYS[i] = counter key of limit i (its window start is in the name)
-- ARGV[i] = window length in ms of limit i (the counter's time to live)
-- Returns the counters after this hit, in KEYS order.
local out = {}
for i, key in ipairs(KEYS) do
  local n = redis.call('INCR', key)
  if n == 1 then redis.call('PEXPIRE', key, ARGV[i]) end
  out[i] = n
end
return out
