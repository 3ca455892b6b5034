-- The hot path of GET /api/snapshot once the session is known: version and cached body of
-- one player in one round trip. Both keys carry the player's hash tag (one cluster slot).
-- KEYS[1] = the player's snapshot version key
-- KEYS[2] = the player's cached body key of the wanted format ('<version>:<body>')
-- ARGV[1] = the version the client holds (from If-None-Match; '' if none)
-- ARGV[2] = now_ms: the version of a player who has none yet (common.snapshot_versions)
-- Returns {version} if the client's version is current or no body of this version is
-- cached, {version, body} otherwise.
local version = redis.call('GET', KEYS[1])
if not version then
  version = ARGV[2]
  redis.call('SET', KEYS[1], version)
end
if version == ARGV[1] then return {version} end
local body = redis.call('GET', KEYS[2])
if body and string.sub(body, 1, #version + 1) == version .. ':' then
  return {version, string.sub(body, #version + 2)}
end
return {version}
