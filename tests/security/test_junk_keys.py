"""One malformed Redis key disrupts only itself (issue 14, finding 7): a queue key of the
wrong type is named and skipped by the stats, the task server's gauges and the CLI; a junk
session cache entry is a cache miss."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import TestClient
from click.testing import CliRunner
from redis.asyncio import Redis

from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue, NewEvent
from common.queue.cli import queue_cli
from common.queue.constants import PartitionKeys
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from gameserver.taskserver import TaskServer
from tests.conftest import TEST_REDIS_URL
from tests.web.conftest import RegisterFn
from webfront import keys
from webfront.sessions import token_hash
from wgctl.cli import cli as wgctl_cli


def _settings(sqlite_url: str, prefix: str) -> Settings:
    return Settings(
        database_url=sqlite_url, redis_url=TEST_REDIS_URL, redis_prefix=prefix, queue_partitions=4
    )  # type: ignore[call-arg]


async def _queue_with_a_bad_partition(settings: Settings, redis: Redis) -> EventQueue:
    queue = EventQueue(redis, prefix=settings.redis_prefix, partitions=4, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    await queue.schedule_many([NewEvent("k", v, now - 1_000) for v in range(40)])
    bad = PartitionKeys(settings.redis_prefix, 2)
    await redis.delete(bad.due)
    await redis.set(bad.due, b"junk")  # the probe's {q7}:due replaced by a string
    await redis.hset(bad.batches, "junk-token", "junk")  # type: ignore[misc]
    await redis.zadd(bad.inflight, {"junk-token": 1, "other-junk": 2})
    return queue


async def test_a_wrong_typed_partition_key_is_named_and_the_rest_reported(
    sqlite_url: str, redis_prefix: str, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(sqlite_url, redis_prefix)
    queue = await _queue_with_a_bad_partition(settings, redis)
    rows = await queue.stats()
    by_partition = {s.partition: s for s in rows}
    assert by_partition[2].error is not None and "{q2}:due is a string" in by_partition[2].error
    good = [s for s in rows if s.partition != 2]
    assert all(s.error is None for s in good)
    assert sum(s.depth for s in good) > 0

    # the task server's gauges: the good partitions are refreshed, the bad one named
    server = TaskServer(settings, HandlerRegistry(), burst=True)
    server.queue = queue
    server.leases = SimpleNamespace(held=frozenset(range(4)))  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="gameserver.taskserver"):
        await server._refresh_stats()
    depth = server.metrics.depth
    for s in good:
        assert depth.labels(str(s.partition))._value.get() == s.depth
    assert "partition 2: stats skipped" in caplog.text
    assert "stats refresh failed" not in caplog.text


def test_the_cli_names_the_bad_partition_and_shows_the_others(
    sqlite_url: str, redis_prefix: str
) -> None:
    settings = _settings(sqlite_url, redis_prefix)

    async def prepare() -> None:
        redis = Redis.from_url(TEST_REDIS_URL)
        try:
            await _queue_with_a_bad_partition(settings, redis)
        finally:
            await redis.aclose()

    asyncio.run(prepare())
    env = {
        "DATABASE_URL": sqlite_url,
        "REDIS_URL": TEST_REDIS_URL,
        "REDIS_PREFIX": redis_prefix,
        "QUEUE_PARTITIONS": "4",
    }
    try:
        result = CliRunner().invoke(queue_cli, ["status"], env=env)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        lines = result.output.splitlines()
        assert any("partition 2 skipped" in line and "{q2}:due" in line for line in lines)
        parts = [line.split()[0] for line in lines if line[:4].strip().isdigit()]
        assert parts == ["0", "1", "3"]
        status = CliRunner().invoke(wgctl_cli, ["status"], env=env)
        assert status.exit_code == 0, status.output
    finally:

        async def clean() -> None:
            redis = Redis.from_url(TEST_REDIS_URL)
            try:
                async for key in redis.scan_iter(match=f"{redis_prefix}:*"):
                    await redis.delete(key)
            finally:
                await redis.aclose()

        asyncio.run(clean())


@pytest.mark.parametrize("junk", [b"junk", b"5:soon", b":", b"-1:99999999999999", b"hash"])
async def test_a_junk_session_entry_is_a_cache_miss(
    client: TestClient,
    register: RegisterFn,
    redis: Redis,
    redis_prefix: str,
    junk: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    player = await register("junk_sec")
    key = keys.session(redis_prefix, token_hash(player.token))
    for path in ("/api/snapshot", "/api/reports"):
        await redis.delete(key)
        if junk == b"hash":
            await redis.hset(key, "a", "b")  # type: ignore[misc]
        else:
            await redis.set(key, junk)
        with caplog.at_level(logging.WARNING, logger="webfront.sessions"):
            resp = await client.get(path, headers=player.auth)
        assert resp.status == 200, (path, await resp.text())
        assert token_hash(player.token) not in caplog.text
        # the entry is mended from the database: the next request reads it as usual
        mended = await redis.get(key)
        assert isinstance(mended, bytes) and mended.startswith(f"{player.player_id}:".encode())
