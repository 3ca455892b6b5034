"""Raw request lines: password and database from the URL, error replies, a server that dies."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from common.clock import ManualClock
from common.embedded_redis import EmbeddedRedis
from common.queue import EventQueue, NewEvent
from common.queue.claims import ClaimLine
from common.queue.line import Line, pack_command
from tests.queue.conftest import START_MS


async def test_lines_log_in_and_use_the_urls_database() -> None:
    with EmbeddedRedis(extra_args=["--requirepass", "s3cret"]) as server:
        client = Redis.from_url(f"redis://:s3cret@127.0.0.1:{server.port}/3")
        queue = EventQueue(client, prefix="wgt", partitions=2, clock=ManualClock(START_MS))
        try:
            await queue.schedule_many([NewEvent("k", 1, START_MS) for _ in range(5)])
            assert [s.depth for s in await queue.stats()] == [0, 5]  # redis-py sees them
            line = ClaimLine(queue, 1, 100, 1_000)
            await line.send([])
            token, _, reply = await line.receive()
            assert len(line.decode(token, reply).events) == 5
            await line.close()
            other = Redis.from_url(f"redis://:s3cret@127.0.0.1:{server.port}/0")
            assert await other.dbsize() == 0  # nothing landed in database 0
            await other.aclose()
        finally:
            await queue.aclose()
            await client.aclose()


async def test_an_error_reply_leaves_the_line_usable(redis: Redis, redis_prefix: str) -> None:
    line = Line(redis)
    key = f"{redis_prefix}:a-string"
    await redis.set(key, "x")
    await line.send(pack_command(("ZADD", key, 1, "m")) + pack_command(("PING",)), replies=2)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await line.read()
    assert await line.read() == b"PONG"
    await line.send(pack_command(("PING",)))
    assert await line.read() == b"PONG"
    await line.close()


async def test_a_dead_server_is_a_connection_error() -> None:
    server = EmbeddedRedis().start()
    client = Redis.from_url(server.url)
    line = Line(client)
    await line.send(pack_command(("PING",)))
    assert await line.read() == b"PONG"
    server.stop()
    with pytest.raises((RedisConnectionError, ConnectionError)):
        await line.send(pack_command(("PING",)))
        await line.read()
    assert line.pending == 0
    await line.close()
    await client.aclose()
