-- Queue depth of one partition.
-- KEYS: due, inflight, batches, dead
-- ARGV: now ms
-- Returns {depth, ready now, in-flight events, dead, earliest due score or nil}
local depth = redis.call('ZCARD', KEYS[1])
local ready = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[1])
--@include _split.lua
local inflight = 0
for _, token in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local batch = redis.call('HGET', KEYS[3], token)
  if batch then inflight = inflight + #split_blobs(batch) end
end
local dead = redis.call('ZCARD', KEYS[4])
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {depth, ready, inflight, dead, head[2] or false}
