"""Snapshot versions: bumped once per change, never below the bump's time, after Redis
forgot its scripts or its data."""

from __future__ import annotations

import asyncio
import json

from redis.asyncio import Redis

from common.snapshot_versions import (
    bump_versions,
    publish_alerts,
    push_channel,
    read_version,
    version_key,
)

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


async def test_bumps_and_alerts_are_published_on_the_worlds_push_channel(
    redis: Redis, redis_prefix: str
) -> None:
    pubsub = redis.pubsub()
    await pubsub.subscribe(push_channel(redis_prefix))
    try:
        await bump_versions(redis, redis_prefix, [3, 1, 3], NOW)  # one message for the batch
        await publish_alerts(redis, redis_prefix, [(3, "incoming_attack", {"march_id": 7})])
        received: list[bytes] = []
        async with asyncio.timeout(10):
            while len(received) < 2:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
                if message is not None:
                    received.append(message["data"])
    finally:
        await pubsub.aclose()
    assert received[0] == f"v 1:{NOW} 3:{NOW}".encode()
    assert received[1].startswith(b"a ")
    assert json.loads(received[1][2:]) == [[3, "incoming_attack", {"march_id": 7}]]
