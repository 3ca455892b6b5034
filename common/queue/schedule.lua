-- Add events to one partition: each blob is a member of *due*; durable ones are indexed by id.
-- KEYS: due, byid
-- ARGV: wake channel, nx ('1' = skip durable events the partition already knows), earliest
--       due ms of the batch, wake message, msgpack array of blobs
-- Publishes the wake message when the batch holds a new earliest event. Returns the number
-- of events added.
local due_key, byid_key = KEYS[1], KEYS[2]
local nx = ARGV[2] == '1'
local head = redis.call('ZRANGE', due_key, 0, 0, 'WITHSCORES')
local blobs = cmsgpack.unpack(ARGV[5])
local zargs, hargs, nz, nh, added = {}, {}, 0, 0, 0

local function flush()
  if nh > 0 then redis.call('HSET', byid_key, unpack(hargs, 1, nh)) end
  if nz > 0 then redis.call('ZADD', due_key, unpack(zargs, 1, nz)) end
  nz, nh = 0, 0
end

for i = 1, #blobs do
  local b = blobs[i]
  local durable = string.byte(b, 36) == 100
  local id = durable and string.sub(b, 7, 22)
  if not (nx and durable and redis.call('HEXISTS', byid_key, id) == 1) then
    zargs[nz + 1] = string.sub(b, 23, 35)
    zargs[nz + 2] = b
    nz = nz + 2
    if durable then
      hargs[nh + 1] = id
      hargs[nh + 2] = b
      nh = nh + 2
    end
    added = added + 1
    if nz >= 4000 then flush() end -- Lua's unpack() has a stack limit of ~8000 values
  end
end
flush()

if added > 0 and (head[2] == nil or tonumber(ARGV[3]) < tonumber(head[2])) then
  redis.call('PUBLISH', ARGV[1], ARGV[4])
end
return added
