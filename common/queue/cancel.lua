-- Cancel a pending event. Atomic against claim.lua: exactly one of them gets the event.
-- KEYS: due, byid, deadinfo
-- ARGV: id (16 hex digits)
-- Returns 1 cancelled, 0 not pending (never scheduled, claimed, ran or cancelled), -2 dead
--@include _find.lua
local b = find_pending(KEYS[1], KEYS[2], ARGV[1])
if b then
  redis.call('ZREM', KEYS[1], b)
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return -2 end
return 0
