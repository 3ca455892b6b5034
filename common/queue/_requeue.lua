-- Fragment: requeue_batch(due_key, byid_key, inflight_key, batches_key, token) returns the
-- events of an in-flight batch to *due* at their stored due time (header bytes 23-35; byte 36
-- is 'd' for a durable event, which is indexed by id again).
-- Returns the number of events returned.
--@include _split.lua
local function requeue_batch(due_key, byid_key, inflight_key, batches_key, token)
  local batch = redis.call('HGET', batches_key, token)
  local n = 0
  if batch then
    for _, b in ipairs(split_blobs(batch)) do
      local due = tonumber(string.sub(b, 23, 35)) or 0 -- a bad blob comes back due at once
      redis.call('ZADD', due_key, due, b)
      if string.byte(b, 36) == 100 then redis.call('HSET', byid_key, string.sub(b, 7, 22), b) end
      n = n + 1
    end
    redis.call('HDEL', batches_key, token)
  end
  redis.call('ZREM', inflight_key, token)
  return n
end
