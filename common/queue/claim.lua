-- Claim up to `limit` due events of one partition as one in-flight batch.
-- KEYS: due, byid, inflight, batches, dead, deadinfo
-- ARGV: now ms, limit, batch token, lease deadline ms,
--       tokens of finished batches to ack first, comma-separated ('' = none: this acks and
--       claims in one round trip),
--       latest due score an event can have (DUE_MS_MAX)
-- Expired in-flight batches first return to *due*, so they are claimed again in order. The
-- blobs move from *due* into the batch, so the ack is O(1).
-- Entries that cannot be framed (wrong prefix, or a length other than 42 + the header's body
-- size) and entries scored outside 0..DUE_MS_MAX (+-inf included) go to *dead* here, each
-- alone with its reason: a batch holds only well-framed blobs, which every script can split.
-- Returns {number of events, their blobs concatenated in run order, earliest due score or
--          nil, earliest lease deadline or nil, {member, reason, ...} of the entries sent to
--          *dead*}
--@include _requeue.lua
local due_key, byid_key, inflight_key, batches_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local dead_key, deadinfo_key = KEYS[5], KEYS[6]
local now = ARGV[1]
local byte, sub, tonumber = string.byte, string.sub, tonumber
local buried = {}

local function framing_error(b)
  if #b < 42 or byte(b, 1) ~= 217 or byte(b, 2) ~= 40 then return 'not an event blob (bad header)' end
  local size = tonumber(sub(b, 37, 42), 16)
  if not size then return 'not an event blob (unreadable body size in its header)' end
  return string.format('body of %d bytes where its header says %d', #b - 42, size)
end

local function bury(b, reason)
  redis.call('ZADD', dead_key, now, b)
  redis.call('HSET', deadinfo_key, sub(b, 7, 22), cmsgpack.pack({reason, 0, tonumber(now)}))
  buried[#buried + 1] = sub(b, 1, 22)
  buried[#buried + 1] = reason
end

for token in string.gmatch(ARGV[5], '[^,]+') do
  redis.call('HDEL', batches_key, token)
  redis.call('ZREM', inflight_key, token)
end

local expired = redis.call('ZRANGEBYSCORE', inflight_key, '-inf', now, 'LIMIT', 0, 16)
for _, token in ipairs(expired) do
  requeue_batch(due_key, byid_key, inflight_key, batches_key, token)
end

-- No event is due before 0 or after DUE_MS_MAX: such a score (-inf would be claimed first,
-- +inf read as the next due time) is someone else's write. Two empty range reads normally.
for _, range in ipairs({{'-inf', '(0'}, {'(' .. ARGV[6], '+inf'}}) do
  local odd = redis.call('ZRANGEBYSCORE', due_key, range[1], range[2], 'WITHSCORES', 'LIMIT', 0, 100)
  for i = 1, #odd, 2 do
    redis.call('ZREM', due_key, odd[i])
    bury(odd[i], 'due score out of range: ' .. odd[i + 1])
  end
end

local blobs = redis.call('ZRANGEBYSCORE', due_key, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = #blobs
local batch = ''
if n > 0 then
  -- the claimed members are exactly the n lowest-ranked ones
  redis.call('ZREMRANGEBYRANK', due_key, 0, n - 1)
  local ids, k = {}, 0
  local good, m = blobs, n -- a copy without the malformed entries once one is found
  for i = 1, n do
    local b = blobs[i]
    local p1, p2 = byte(b, 1, 2)
    local durable = byte(b, 36) == 100
    -- msgpack str8 of 40 (\217 '(') and exactly the body size its header says (6 hex digits)
    if p1 == 217 and p2 == 40 and #b == 42 + (tonumber(sub(b, 37, 42), 16) or -100) then
      if good ~= blobs then
        m = m + 1
        good[m] = b
      end
      if durable then
        k = k + 1
        ids[k] = sub(b, 7, 22)
      end
    else
      if good == blobs then
        good = {}
        for j = 1, i - 1 do good[j] = blobs[j] end
        m = i - 1
      end
      -- a durable one stays indexed by id while dead, as retry.lua leaves it
      bury(b, framing_error(b))
    end
  end
  n = m
  if k > 0 then redis.call('HDEL', byid_key, unpack(ids)) end
  if n > 0 then
    -- blobs are self-delimiting: the batch is kept and sent as their concatenation
    batch = table.concat(good, '', 1, n)
    redis.call('HSET', batches_key, ARGV[3], batch)
    redis.call('ZADD', inflight_key, ARGV[4], ARGV[3])
  end
end

local head = redis.call('ZRANGE', due_key, 0, 0, 'WITHSCORES')
local lease = redis.call('ZRANGE', inflight_key, 0, 0, 'WITHSCORES')
return {n, batch, head[2] or false, lease[2] or false, buried}
