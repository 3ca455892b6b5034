"""The ``queue`` management commands: status, dead, requeue, drop."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner
from redis.asyncio import Redis
from sqlalchemy import func, select

from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue, NewEvent, RetryPolicy
from common.queue.cli import queue_cli
from common.queue.durable import add_durable_events
from common.settings import Settings
from db.engine import create_engine, session_factory
from db.models import ScheduledEvent
from tests.conftest import TEST_REDIS_URL


def _settings(sqlite_url: str, prefix: str) -> Settings:
    return Settings(
        database_url=sqlite_url, redis_url=TEST_REDIS_URL, redis_prefix=prefix, queue_partitions=4
    )  # type: ignore[call-arg]


async def _prepare(settings: Settings) -> list[int]:
    """Two dead events (one durable, one in-memory) and three pending ones."""
    redis = Redis.from_url(settings.redis_url)
    engine = create_engine(settings)
    queue = EventQueue(redis, prefix=settings.redis_prefix, partitions=4, clock=SYSTEM_CLOCK)
    try:
        now = SYSTEM_CLOCK.now_ms()
        async with session_factory(engine)() as session, session.begin():
            [durable] = await add_durable_events(session, [NewEvent("march", 1, now - 5_000)])
        await queue.index([durable])
        memory = await queue.schedule(NewEvent("build", 1, now - 5_000, {"b": 1}))
        await queue.schedule_many([NewEvent("later", v, now + 60_000) for v in range(3)])
        claim = await queue.claim(1)
        failures = [(e, f"{e.kind} failed: no such village") for e in claim.events]
        assert await queue.retry(1, claim.token, failures, RetryPolicy(max_attempts=1)) == (0, 2)
        return [durable.id, memory]
    finally:
        await queue.aclose()
        await redis.aclose()
        await engine.dispose()


async def _pending_rows(settings: Settings) -> int:
    engine = create_engine(settings)
    try:
        async with session_factory(engine)() as session:
            return int(await session.scalar(select(func.count()).select_from(ScheduledEvent)) or 0)
    finally:
        await engine.dispose()


def test_status_dead_requeue_and_drop(sqlite_url: str, redis_prefix: str, redis: Redis) -> None:
    settings = _settings(sqlite_url, redis_prefix)
    durable, memory = asyncio.run(_prepare(settings))
    runner = CliRunner()

    status = runner.invoke(queue_cli, ["status"], obj=settings)
    assert status.exit_code == 0, status.output
    lines = status.output.splitlines()
    assert lines[0].split()[:6] == ["part", "depth", "ready", "inflight", "dead", "lag"]
    assert lines[-1].split()[:5] == ["all", "3", "0", "0", "2"]
    rows = [
        json.loads(line)
        for line in runner.invoke(queue_cli, ["status", "--json"], obj=settings).output.splitlines()
    ]
    assert sum(r["dead"] for r in rows) == 2 and rows[1]["partition"] == 1

    dead = runner.invoke(queue_cli, ["dead"], obj=settings)
    assert dead.exit_code == 0
    assert f"{durable}  p1  march village 1  attempts 1" in dead.output
    assert "error: build failed: no such village" in dead.output

    requeued = runner.invoke(queue_cli, ["requeue", str(memory), "12345"], obj=settings)
    assert requeued.exit_code == 0
    assert "requeued 1 event(s)" in requeued.output
    assert "12345: not a dead event" in requeued.output

    assert asyncio.run(_pending_rows(settings)) == 1
    dropped = runner.invoke(queue_cli, ["drop", "--all", "--yes"], obj=settings)
    assert dropped.exit_code == 0 and "dropped 1 event(s)" in dropped.output
    assert asyncio.run(_pending_rows(settings)) == 0  # the durable row went too
    assert "no dead events" in runner.invoke(queue_cli, ["dead"], obj=settings).output

    usage = runner.invoke(queue_cli, ["drop"], obj=settings)
    assert usage.exit_code == 2 and "name event ids or pass --all" in usage.output


def test_unreachable_redis_is_one_line_and_an_exit_code(sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, redis_url="redis://127.0.0.1:1/0")  # type: ignore[call-arg]
    result = CliRunner().invoke(queue_cli, ["status"], obj=settings)
    assert result.exit_code == 3
    assert "queue: REDIS_URL: cannot reach" in result.output
