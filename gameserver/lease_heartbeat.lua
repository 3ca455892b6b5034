-- One heartbeat of one process in a lease group: stay a live member, renew the items we own,
-- and take free items up to our fair share. Times come from the Redis server clock, so hosts
-- with skewed clocks still agree on expiry.
-- KEYS: members (zset owner -> expiry ms), owners (hash item -> owner), expiries (hash item -> ms)
-- ARGV: owner, ttl ms, item count, greedy ('1': not a member, takes every free item)
-- Returns {share, server now ms, owned items...}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, ttl, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local greedy = ARGV[4] == '1'

if not greedy then redis.call('ZADD', KEYS[1], now + ttl, me) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)

-- fair share: members sorted by name, the first (count % n) get one item more
local share = count
if not greedy then
  local live = redis.call('ZRANGE', KEYS[1], 0, -1)
  table.sort(live)
  local n, rank = #live, 1
  for i, name in ipairs(live) do
    if name == me then rank = i end
  end
  share = math.floor(count / n)
  if rank <= count % n then share = share + 1 end
end

local owner_of, expiry_of = {}, {}
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do owner_of[tonumber(flat[i])] = flat[i + 1] end
flat = redis.call('HGETALL', KEYS[3])
for i = 1, #flat, 2 do expiry_of[tonumber(flat[i])] = tonumber(flat[i + 1]) end

local owned, free = {}, {}
for item = 0, count - 1 do
  local o, e = owner_of[item], expiry_of[item]
  if o == me and e and e > now then
    owned[#owned + 1] = item
  elseif not o or not e or e <= now then
    free[#free + 1] = item
  end
end
for i = 1, math.min(share - #owned, #free) do owned[#owned + 1] = free[i] end

local out = {share, now}
for _, item in ipairs(owned) do
  redis.call('HSET', KEYS[2], item, me)
  redis.call('HSET', KEYS[3], item, now + ttl)
  out[#out + 1] = item
end
return out
