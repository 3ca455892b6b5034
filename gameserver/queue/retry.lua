-- Take failed events out of an in-flight batch: back to *due* (a retry) or to *dead*.
-- KEYS: due, payload, batches, dead, deadinfo
-- ARGV: now ms, batch token, msgpack array of {member (the blob's first 20 bytes),
--       due ms or -1 for dead, new blob or '' to keep the batch's blob, dead info or ''}
-- Returns the number of events moved; 0 when the batch is no longer ours (it expired).
local packed = redis.call('HGET', KEYS[3], ARGV[2])
if not packed then return 0 end
local blobs = cmsgpack.unpack(packed)
local at = {}
for i, b in ipairs(blobs) do at[string.sub(b, 1, 20)] = i end
local moved = 0
for _, e in ipairs(cmsgpack.unpack(ARGV[3])) do
  local m = e[1]
  local i = at[m]
  if i then
    local b = e[3]
    if b == '' then b = blobs[i] end
    blobs[i] = false
    at[m] = nil
    local id = string.sub(m, 5, 20)
    redis.call('HSET', KEYS[2], id, b)
    if e[2] >= 0 then
      redis.call('ZADD', KEYS[1], e[2], m)
    else
      redis.call('ZADD', KEYS[4], ARGV[1], m)
      redis.call('HSET', KEYS[5], id, e[4])
    end
    moved = moved + 1
  end
end
local rest = {}
for _, b in ipairs(blobs) do
  if b then rest[#rest + 1] = b end
end
redis.call('HSET', KEYS[3], ARGV[2], cmsgpack.pack(rest))
return moved
