-- Give up items we own (after their work stopped), or all of them and our membership.
-- KEYS: members, owners, expiries
-- ARGV: owner, leave ('1' = also leave the group), items...
-- Returns the number of items released.
local me = ARGV[1]
local n = 0
for i = 3, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) == me then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    n = n + 1
  end
end
if ARGV[2] == '1' then redis.call('ZREM', KEYS[1], me) end
return n
