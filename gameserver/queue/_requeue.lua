-- Fragment: requeue_batch(due_key, payload_key, inflight_key, batches_key, token) returns the
-- events of an in-flight batch to *due* at their stored due time (bytes 21-33 of each blob).
-- Returns the number of events returned.
local function requeue_batch(due_key, payload_key, inflight_key, batches_key, token)
  local packed = redis.call('HGET', batches_key, token)
  local n = 0
  if packed then
    for _, b in ipairs(cmsgpack.unpack(packed)) do
      redis.call('HSET', payload_key, string.sub(b, 5, 20), b)
      redis.call('ZADD', due_key, string.sub(b, 21, 33), string.sub(b, 1, 20))
      n = n + 1
    end
    redis.call('HDEL', batches_key, token)
  end
  redis.call('ZREM', inflight_key, token)
  return n
end
