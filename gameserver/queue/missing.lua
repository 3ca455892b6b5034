-- Which of the given event ids does the partition not know (pending, in flight or dead)?
-- KEYS: payload, inflight, batches
-- ARGV: ids (16 hex digits each)
-- Returns the unknown ids.
local flying = {}
for _, token in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local packed = redis.call('HGET', KEYS[3], token)
  if packed then
    for _, b in ipairs(cmsgpack.unpack(packed)) do flying[string.sub(b, 5, 20)] = true end
  end
end
local out = {}
for i = 1, #ARGV do
  local id = ARGV[i]
  if not flying[id] and redis.call('HEXISTS', KEYS[1], id) == 0 then out[#out + 1] = id end
end
return out
