"""Per-player snapshot versions in Redis: the ETag of ``GET /api/snapshot``.

Every change a player can see bumps their version. A version is never smaller
than the time of its bump in ms, so after Redis loses its data a fresh version
(set from the clock) can never equal an ETag a browser still holds.

Every bump is also published on the world's push channel (``push_channel``), in
the same script: the web processes' server-sent event streams (``webfront.push``)
tell the players' browsers at once instead of waiting for their next poll.
Messages: ``v <player>:<version> ...`` (new versions) and ``a <JSON list of
[player, kind, data]>`` (alerts, ``publish_alerts``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

# KEYS = version keys, ARGV[1] = now_ms, ARGV[2] = push channel, ARGV[2 + i] = the player
# of KEYS[i]; each version = max(old + 1, now_ms), all published in one message
_BUMP = """
local now = tonumber(ARGV[1])
local changes = {}
for i, key in ipairs(KEYS) do
  local v = tonumber(redis.call('GET', key) or '0') + 1
  if v < now then v = now end
  redis.call('SET', key, v)
  changes[i] = ARGV[i + 2] .. ':' .. v
end
redis.call('PUBLISH', ARGV[2], 'v ' .. table.concat(changes, ' '))
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
    """Tagged ``{<player_id>}``: one cluster slot with the player's other keys
    (``webfront.keys``)."""
    return f"{prefix}:snapver:{{{player_id}}}"


def push_channel(prefix: str) -> str:
    """The world's pub/sub channel of version changes and alerts."""
    return f"{prefix}:push"


async def bump_versions(
    redis: Redis | RedisCluster, prefix: str, player_ids: Iterable[int], now_ms: int
) -> None:
    """Bump the players' versions: one script call for all of them (a batch of march
    arrivals touches hundreds of players), one per hash slot on a cluster."""
    players = sorted(set(player_ids))
    if not players:
        return
    bump = redis.register_script(_BUMP)
    channel = push_channel(prefix)
    if not isinstance(redis, RedisCluster):
        keys = [version_key(prefix, p) for p in players]
        await bump(keys=keys, args=[now_ms, channel, *players])
        return
    by_slot: dict[int, list[int]] = {}
    for player in players:
        by_slot.setdefault(redis.keyslot(version_key(prefix, player)), []).append(player)
    for same_slot in by_slot.values():
        keys = [version_key(prefix, p) for p in same_slot]
        await bump(keys=keys, args=[now_ms, channel, *same_slot])


async def publish_alerts(
    redis: Redis | RedisCluster, prefix: str, alerts: Sequence[tuple[int, str, Any]]
) -> None:
    """Publish ``(player, kind, data)`` alerts on the push channel: one message for all."""
    if alerts:
        message = "a " + json.dumps([list(a) for a in alerts], separators=(",", ":"))
        await redis.publish(push_channel(prefix), message)


class ScriptRunner(Protocol):
    """A pipelined client that runs a script by its text (``common.fastredis.FastRedis``)."""

    async def eval_script(
        self, source: str, keys: tuple[str, ...], args: tuple[int | str | bytes, ...]
    ) -> Any: ...


async def bump_versions_on(
    client: ScriptRunner, prefix: str, player_ids: Iterable[int], now_ms: int
) -> None:
    """``bump_versions`` on the web tier's pipelined connection (one Redis, not a cluster):
    it goes out in the same write as the other commands of its loop iteration."""
    players = sorted(set(player_ids))
    if players:
        keys = tuple(version_key(prefix, p) for p in players)
        await client.eval_script(_BUMP, keys, (now_ms, push_channel(prefix), *players))


async def read_version(
    redis: Redis | RedisCluster, prefix: str, player_id: int, now_ms: int
) -> int:
    return int(await redis.eval(_READ, 1, version_key(prefix, player_id), now_ms))
