"""The hot path's lean Redis client against a real Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from common.fastredis import FastRedis, Script
from tests.conftest import TEST_REDIS_URL
from tests.waiting import wait_for


async def test_commands_pipeline_and_replies_match(redis: Redis, redis_prefix: str) -> None:
    fast = FastRedis(TEST_REDIS_URL)
    try:
        keys = [f"{redis_prefix}:k{i}" for i in range(50)]
        await asyncio.gather(*(fast.execute("SET", k, f"v{i}é") for i, k in enumerate(keys)))
        values = await asyncio.gather(*(fast.execute("GET", k) for k in keys))
        assert values == [f"v{i}é".encode() for i in range(50)]
        assert await fast.execute("GET", f"{redis_prefix}:missing") is None
        with pytest.raises(ResponseError):
            await fast.execute("INCR", keys[0])  # not an integer
        assert await fast.execute("GET", keys[1]) == "v1é".encode()  # still in step
    finally:
        await fast.close()


async def test_evalsha_loads_an_unknown_script(redis_prefix: str, redis: Redis) -> None:
    # a fresh source: Redis has never seen it, so EVALSHA fails and EVAL runs it
    script = Script(f"-- {uuid.uuid4()}\nreturn {{KEYS[1], ARGV[1], ARGV[2]}}")
    fast = FastRedis(TEST_REDIS_URL)
    try:
        for _ in range(2):
            reply = await fast.evalsha(script, (f"{redis_prefix}:a",), ("x", 7))
            assert reply == [f"{redis_prefix}:a".encode(), b"x", b"7"]
    finally:
        await fast.close()


async def test_a_killed_connection_fails_then_reconnects(redis_prefix: str, redis: Redis) -> None:
    fast = FastRedis(TEST_REDIS_URL)
    try:
        client_id = await fast.execute("CLIENT", "ID")
        await redis.client_kill_filter(_id=client_id)

        async def reconnected() -> bool:
            try:
                return bool(await fast.execute("CLIENT", "ID") != client_id)
            except RedisConnectionError:  # a command in flight when the socket closed
                return False

        await wait_for(reconnected, "a new connection in place of the killed one")
        assert await fast.execute("PING") == b"PONG"
    finally:
        await fast.close()
