-- Take failed events out of an in-flight batch: back to *due* (a retry) or to *dead*.
-- KEYS: due, byid, batches, dead, deadinfo
-- ARGV: now ms, batch token, msgpack array of {member (the blob's first 22 bytes),
--       score: due ms, -1 for dead, or -2 for the score in the blob's header (back as it was),
--       new blob or '' to keep the batch's blob, dead info or ''}
-- Returns the number of events moved; 0 when the batch is no longer ours (it expired).
--@include _split.lua
local batch = redis.call('HGET', KEYS[3], ARGV[2])
if not batch then return 0 end
local blobs = split_blobs(batch)
local at = {}
for i, b in ipairs(blobs) do at[string.sub(b, 1, 22)] = i end
local moved = 0
for _, e in ipairs(cmsgpack.unpack(ARGV[3])) do
  local i = at[e[1]]
  if i then
    local b = e[3]
    if b == '' then b = blobs[i] end
    blobs[i] = false
    at[e[1]] = nil
    local id = string.sub(b, 7, 22)
    if e[2] == -2 then
      redis.call('ZADD', KEYS[1], tonumber(string.sub(b, 23, 35)) or 0, b)
    elseif e[2] >= 0 then
      redis.call('ZADD', KEYS[1], e[2], b)
    else
      redis.call('ZADD', KEYS[4], ARGV[1], b)
      redis.call('HSET', KEYS[5], id, e[4])
    end
    -- a durable event stays known by id while pending or dead (the reconciler asks)
    if string.byte(b, 36) == 100 then redis.call('HSET', KEYS[2], id, b) end
    moved = moved + 1
  end
end
local rest = {}
for _, b in ipairs(blobs) do
  if b then rest[#rest + 1] = b end
end
redis.call('HSET', KEYS[3], ARGV[2], table.concat(rest))
return moved
