-- Which of the given durable event ids does the partition not know (pending, in flight, dead)?
-- KEYS: byid, inflight, batches
-- ARGV: ids (16 hex digits each)
-- Returns the unknown ids.
--@include _split.lua
local flying = {}
for _, token in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local batch = redis.call('HGET', KEYS[3], token)
  if batch then
    for _, b in ipairs(split_blobs(batch)) do flying[string.sub(b, 7, 22)] = true end
  end
end
local out = {}
for i = 1, #ARGV do
  local id = ARGV[i]
  if not flying[id] and redis.call('HEXISTS', KEYS[1], id) == 0 then out[#out + 1] = id end
end
return out
