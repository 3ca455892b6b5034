-- Claim up to `limit` due events of one partition as one in-flight batch.
-- KEYS: due, payload, inflight, batches, dead, deadinfo
-- ARGV: now ms, limit, batch token, lease deadline ms,
--       token of a finished batch to ack first ('' = none: ack and claim in one round trip)
-- Expired in-flight batches first return to *due*, so they are claimed again in order.
-- The blobs move from the payload hash into the batch, so the ack is O(1). A member without
-- a payload goes straight to *dead*.
-- Returns {blobs in run order, earliest due score or nil, earliest lease deadline or nil,
--          number of members without payload}
--@include _requeue.lua
local due_key, payload_key, inflight_key, batches_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = ARGV[1]

if ARGV[5] ~= '' then
  redis.call('HDEL', batches_key, ARGV[5])
  redis.call('ZREM', inflight_key, ARGV[5])
end

local expired = redis.call('ZRANGEBYSCORE', inflight_key, '-inf', now, 'LIMIT', 0, 16)
for _, token in ipairs(expired) do
  requeue_batch(due_key, payload_key, inflight_key, batches_key, token)
end

local members = redis.call('ZRANGEBYSCORE', due_key, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = #members
local blobs, missing = {}, 0
if n > 0 then
  -- the claimed members are exactly the n lowest-ranked ones
  redis.call('ZREMRANGEBYRANK', due_key, 0, n - 1)
  local ids = {}
  for i = 1, n do ids[i] = string.sub(members[i], 5) end
  local found = redis.call('HMGET', payload_key, unpack(ids))
  redis.call('HDEL', payload_key, unpack(ids))
  local k = 0
  for i = 1, n do
    local b = found[i]
    if b then
      k = k + 1
      blobs[k] = b
    else
      missing = missing + 1
      redis.call('ZADD', KEYS[5], now, members[i])
      redis.call('HSET', KEYS[6], ids[i], cmsgpack.pack({'payload missing', 0, tonumber(now)}))
    end
  end
  if k > 0 then
    redis.call('HSET', batches_key, ARGV[3], cmsgpack.pack(blobs))
    redis.call('ZADD', inflight_key, ARGV[4], ARGV[3])
  end
end

local head = redis.call('ZRANGE', due_key, 0, 0, 'WITHSCORES')
local lease = redis.call('ZRANGE', inflight_key, 0, 0, 'WITHSCORES')
return {blobs, head[2] or false, lease[2] or false, missing}
