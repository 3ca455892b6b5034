-- Return every in-flight batch of a partition to *due* now: its previous owner is gone.
-- KEYS: due, byid, inflight, batches
-- Returns the number of events returned.
--@include _requeue.lua
local n = 0
for _, token in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  n = n + requeue_batch(KEYS[1], KEYS[2], KEYS[3], KEYS[4], token)
end
return n
