-- The hot path of GET /api/snapshot: session, version and cached body in one round trip.
-- KEYS[1] = the session's cache key
-- ARGV[1] = snapshot version key prefix (the player id completes it)
-- ARGV[2] = snapshot body cache key prefix
-- ARGV[3] = the version the client holds (from If-None-Match; '' if none)
-- ARGV[4] = body format, 'j' (JSON) or 'm' (msgpack)
-- Returns {} if the session is not cached, {'?'} if its key is not a string, {session} if it is revoked or the
-- player has no version yet, {session, version} if the client's version is
-- current or no body is cached, {session, version, body} otherwise.
local session = redis.pcall('GET', KEYS[1])
if type(session) == 'table' then return {'?'} end  -- not a string: junk, the caller drops it
if not session then return {} end
local player = string.match(session, '^(%d+):')
if not player then return {session} end
local version = redis.call('GET', ARGV[1] .. player)
if not version then return {session} end
if version == ARGV[3] then return {session, version} end
local body = redis.call('GET', ARGV[2] .. player .. ':' .. version .. ':' .. ARGV[4])
if not body then return {session, version} end
return {session, version, body}
