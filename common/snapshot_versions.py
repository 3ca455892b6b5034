"""Per-player snapshot versions in Redis: the ETag of ``GET /api/snapshot``.

Every change a player can see bumps their version. A version is never smaller
than the time of its bump in ms, so after Redis loses its data a fresh version
(set from the clock) can never equal an ETag a browser still holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from redis.asyncio import Redis

# KEYS[1] = version key, ARGV[1] = now_ms; version = max(old + 1, now_ms)
_BUMP = """
local v = tonumber(redis.call('GET', KEYS[1]) or '0') + 1
local now = tonumber(ARGV[1])
if v < now then v = now end
redis.call('SET', KEYS[1], v)
return v
"""
# KEYS[1] = version key, ARGV[1] = now_ms; sets the key to now_ms if missing, returns it
_READ = """
local v = redis.call('GET', KEYS[1])
if v then return tonumber(v) end
redis.call('SET', KEYS[1], ARGV[1])
return tonumber(ARGV[1])
"""


def version_key(prefix: str, player_id: int) -> str:
    return f"{prefix}:snapver:{player_id}"


async def bump_versions(redis: Redis, prefix: str, player_ids: Iterable[int], now_ms: int) -> None:
    ids = sorted(set(player_ids))
    if not ids:
        return
    bump = redis.register_script(_BUMP)  # EVALSHA: a batch of events bumps hundreds of players
    async with redis.pipeline(transaction=False) as pipe:
        for player_id in ids:
            await bump(keys=[version_key(prefix, player_id)], args=[now_ms], client=pipe)
        await pipe.execute()


async def read_version(redis: Redis, prefix: str, player_id: int, now_ms: int) -> int:
    return int(await redis.eval(_READ, 1, version_key(prefix, player_id), now_ms))
