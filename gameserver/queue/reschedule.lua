-- Move a pending event to a new due time. Atomic against claim.lua.
-- KEYS: due, payload, dead
-- ARGV: id, blob the caller read (compare-and-set), new blob, new due ms, wake channel, wake message
-- Returns 1 moved, 0 not pending (claimed, ran, unknown), -2 dead, -3 the blob changed since
-- it was read (the caller reads again)
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
if v ~= ARGV[2] then return -3 end
local m = string.sub(v, 1, 20)
if not redis.call('ZSCORE', KEYS[1], m) then
  if redis.call('ZSCORE', KEYS[3], m) then return -2 end
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[4], m)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if redis.call('ZRANGE', KEYS[1], 0, 0)[1] == m then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
