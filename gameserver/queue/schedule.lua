-- Add events to one partition.
-- KEYS: due, payload
-- ARGV: wake channel, nx ('1' = skip ids the partition already knows), earliest due ms of the
--       batch, wake message, msgpack array of blobs (member .. due ms .. body)
-- Publishes on the wake channel when the batch holds a new earliest event, so a sleeping
-- worker wakes up for it. Returns the number of events added.
local due_key, payload_key = KEYS[1], KEYS[2]
local nx = ARGV[2] == '1'
local head = redis.call('ZRANGE', due_key, 0, 0, 'WITHSCORES')
local blobs = cmsgpack.unpack(ARGV[5])
local zargs, hargs, n, added = {}, {}, 0, 0

local function flush()
  if n > 0 then
    redis.call('HSET', payload_key, unpack(hargs, 1, n))
    redis.call('ZADD', due_key, unpack(zargs, 1, n))
    n = 0
  end
end

for i = 1, #blobs do
  local b = blobs[i]
  local id = string.sub(b, 5, 20)
  if not (nx and redis.call('HEXISTS', payload_key, id) == 1) then
    zargs[n + 1] = string.sub(b, 21, 33)
    zargs[n + 2] = string.sub(b, 1, 20)
    hargs[n + 1] = id
    hargs[n + 2] = b
    n = n + 2
    added = added + 1
    if n >= 4000 then flush() end -- Lua's unpack() has a stack limit of ~8000 values
  end
end
flush()

if added > 0 and (head[2] == nil or tonumber(ARGV[3]) < tonumber(head[2])) then
  redis.call('PUBLISH', ARGV[1], ARGV[4])
end
return added
