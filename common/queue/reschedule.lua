-- Move a pending event to a new due time. Atomic against claim.lua.
-- KEYS: due, byid, deadinfo
-- ARGV: id, blob the caller read (compare-and-set), new blob, new due ms, wake channel,
--       wake message
-- Returns 1 moved, 0 not pending (claimed, ran, unknown), -2 dead, -3 the blob changed since
-- it was read (the caller reads again)
--@include _find.lua
local b = find_pending(KEYS[1], KEYS[2], ARGV[1])
if not b then
  if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return -2 end
  return 0
end
if b ~= ARGV[2] then return -3 end
redis.call('ZREM', KEYS[1], b)
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
if string.byte(b, 36) == 100 then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
if redis.call('ZRANGE', KEYS[1], 0, 0)[1] == ARGV[3] then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
