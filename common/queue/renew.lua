-- Extend the lease of in-flight batches that are still ours.
-- KEYS: inflight
-- ARGV: lease deadline ms, batch tokens...
-- Returns the number of batches renewed (an expired, requeued batch is not revived).
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
    n = n + 1
  end
end
return n
