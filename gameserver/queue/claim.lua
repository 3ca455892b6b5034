-- Claim up to `limit` due events of one partition as one in-flight batch.
-- KEYS: due, byid, inflight, batches
-- ARGV: now ms, limit, batch token, lease deadline ms,
--       tokens of finished batches to ack first, comma-separated ('' = none: this acks and
--       claims in one round trip)
-- Expired in-flight batches first return to *due*, so they are claimed again in order. The
-- blobs move from *due* into the batch, so the ack is O(1).
-- Returns {number of events, their blobs concatenated in run order, earliest due score or
--          nil, earliest lease deadline or nil}
--@include _requeue.lua
local due_key, byid_key, inflight_key, batches_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = ARGV[1]

for token in string.gmatch(ARGV[5], '[^,]+') do
  redis.call('HDEL', batches_key, token)
  redis.call('ZREM', inflight_key, token)
end

local expired = redis.call('ZRANGEBYSCORE', inflight_key, '-inf', now, 'LIMIT', 0, 16)
for _, token in ipairs(expired) do
  requeue_batch(due_key, byid_key, inflight_key, batches_key, token)
end

local blobs = redis.call('ZRANGEBYSCORE', due_key, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = #blobs
local batch = ''
if n > 0 then
  -- the claimed members are exactly the n lowest-ranked ones
  redis.call('ZREMRANGEBYRANK', due_key, 0, n - 1)
  local ids, k = {}, 0
  for i = 1, n do
    if string.byte(blobs[i], 36) == 100 then
      k = k + 1
      ids[k] = string.sub(blobs[i], 7, 22)
    end
  end
  if k > 0 then redis.call('HDEL', byid_key, unpack(ids)) end
  -- blobs are self-delimiting: the batch is kept and sent as their concatenation
  batch = table.concat(blobs)
  redis.call('HSET', batches_key, ARGV[3], batch)
  redis.call('ZADD', inflight_key, ARGV[4], ARGV[3])
end

local head = redis.call('ZRANGE', due_key, 0, 0, 'WITHSCORES')
local lease = redis.call('ZRANGE', inflight_key, 0, 0, 'WITHSCORES')
return {n, batch, head[2] or false, lease[2] or false}
