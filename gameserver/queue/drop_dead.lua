-- Delete a dead event for good.
-- KEYS: dead, payload, deadinfo
-- ARGV: member
-- Returns 1 dropped, 0 not dead
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 then
  local id = string.sub(ARGV[1], 5)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
return removed
