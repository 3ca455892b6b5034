-- Fixed-window counters checked in order: a hit counts against limit i only when it
-- passed limits 1..i-1, so a hit refused by an earlier limit costs the later ones nothing.
-- On a cluster each call gets the counters of one slot (one check): the caller stages them.
-- KEYS[i] = counter key of limit i (its window start is in the name)
-- ARGV[2i-1] = window length in ms of limit i (the counter's time to live)
-- ARGV[2i] = the count limit i allows per window
-- Returns the counters after this hit, in KEYS order: 0 for the limits not reached.
local out = {}
local refused = false
for i, key in ipairs(KEYS) do
  if refused then
    out[i] = 0
  else
    local n = redis.call('INCR', key)
    if n == 1 then redis.call('PEXPIRE', key, ARGV[2 * i - 1]) end
    out[i] = n
    refused = n > tonumber(ARGV[2 * i])
  end
end
return out
