"""Per-player snapshot versions in Redis: the ETag of ``GET /api/snapshot``.

Every change a player can see bumps their version. A version is never smaller
than the time of its bump in ms, so after Redis loses its data a fresh version
(set from the clock) can never equal an ETag a browser still holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

# KEYS = version keys, ARGV[1] = now_ms; each version = max(old + 1, now_ms)
_BUMP = """
local now = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  local v = tonumber(redis.call('GET', key) or '0') + 1
  if v < now then v = now end
  redis.call('SET', key, v)
end
return #KEYS
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


async def bump_versions(
    redis: Redis | RedisCluster, prefix: str, player_ids: Iterable[int], now_ms: int
) -> None:
    """Bump the players' versions: one script call for all of them (a batch of march
    arrivals touches hundreds of players), one per hash slot on a cluster."""
    keys = [version_key(prefix, p) for p in sorted(set(player_ids))]
    if not keys:
        return
    bump = redis.register_script(_BUMP)
    if not isinstance(redis, RedisCluster):
        await bump(keys=keys, args=[now_ms])
        return
    by_slot: dict[int, list[str]] = {}
    for key in keys:
        by_slot.setdefault(redis.keyslot(key), []).append(key)
    for same_slot in by_slot.values():
        await bump(keys=same_slot, args=[now_ms])


class ScriptRunner(Protocol):
    """A pipelined client that runs a script by its text (``webfront.fastredis.FastRedis``)."""

    async def eval_script(
        self, source: str, keys: tuple[str, ...], args: tuple[int, ...]
    ) -> Any: ...


async def bump_versions_on(
    client: ScriptRunner, prefix: str, player_ids: Iterable[int], now_ms: int
) -> None:
    """``bump_versions`` on the web tier's pipelined connection (one Redis, not a cluster):
    it goes out in the same write as the other commands of its loop iteration."""
    keys = tuple(version_key(prefix, p) for p in sorted(set(player_ids)))
    if keys:
        await client.eval_script(_BUMP, keys, (now_ms,))


async def read_version(
    redis: Redis | RedisCluster, prefix: str, player_id: int, now_ms: int
) -> int:
    return int(await redis.eval(_READ, 1, version_key(prefix, player_id), now_ms))
