-- Cancel a pending event. Atomic against claim.lua: exactly one of them gets the event.
-- KEYS: due, payload, dead
-- ARGV: id (16 hex digits)
-- Returns 1 cancelled, 0 not pending (never scheduled, claimed, ran or cancelled), -2 dead
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
local m = string.sub(v, 1, 20)
if redis.call('ZREM', KEYS[1], m) == 1 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
if redis.call('ZSCORE', KEYS[3], m) then return -2 end
return 0
