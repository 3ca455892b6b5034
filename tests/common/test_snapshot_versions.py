"""Snapshot versions: bumped once per change, never below the bump's time, after Redis
forgot its scripts or its data."""

from __future__ import annotations

from redis.asyncio import Redis

from common.snapshot_versions import bump_versions, read_version, version_key

NOW = 1_800_000_000_000


async def test_bumps_survive_a_script_flush_and_never_go_below_the_clock(
    redis: Redis, redis_prefix: str
) -> None:
    await bump_versions(redis, redis_prefix, [1, 2, 2], NOW)
    assert await read_version(redis, redis_prefix, 1, NOW) == NOW
    await redis.script_flush()  # as after a Redis restart: EVALSHA must reload the script
    await bump_versions(redis, redis_prefix, [1], NOW)
    assert await read_version(redis, redis_prefix, 1, NOW) == NOW + 1
    assert await read_version(redis, redis_prefix, 2, NOW) == NOW
    await redis.delete(version_key(redis_prefix, 1))  # data lost: the clock takes over
    await bump_versions(redis, redis_prefix, [1], NOW + 5_000)
    assert await read_version(redis, redis_prefix, 1, NOW) == NOW + 5_000
