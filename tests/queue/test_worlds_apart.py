"""Worlds that share one Redis are apart: a world fed malformed entries, a queue key of the
wrong type and events of kinds it has no handler for does not delay another world's
events, and nothing of either leaves its prefix."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK, ManualClock
from common.queue import Event, EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.settings import Settings
from db.engine import create_engine, session_factory
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.taskserver import TaskServer
from tests.conftest import delete_prefix
from tests.queue.conftest import START_MS, eventually

pytestmark = pytest.mark.slow
KIND = "arrive"
EVENTS = 40
FAST = TaskServerConfig(partition_lease_ttl_ms=1_000, partition_heartbeat_ms=100)


async def _noisy_world(redis: Redis, prefix: str, queue: EventQueue, now_ms: int) -> None:
    """What the probe and the stray game did to their own worlds."""
    await queue.schedule_many([NewEvent("harvest_done", v, now_ms) for v in range(200)])
    for p in range(queue.partitions):
        due = queue.keys(p).due
        await redis.zadd(due, {b"not an event": now_ms, b"\xd9\x28" + b"x" * 60: 0})
        await redis.zadd(due, {b"\xd9\x28" + b"0" * 40 + b"junk": float("inf")})
    await redis.delete(queue.keys(1).due)
    await redis.set(queue.keys(1).due, "a string where a sorted set belongs")


async def test_a_noisy_world_on_the_same_redis_does_not_delay_another(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    redis: Redis,
    redis_prefix: str,
    sqlite_template: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = settings.model_copy(update={"queue_partitions": 4})
    noisy_db = tmp_path / "noisy.db"
    shutil.copy(sqlite_template, noisy_db)
    noisy = settings.model_copy(
        update={
            "redis_prefix": f"{redis_prefix}-noisy",
            "database_url": f"sqlite+aiosqlite:///{noisy_db}",
            "queue_partitions": 4,
        }
    )
    ran: list[tuple[int, int]] = []  # (event id, clock ms when it ran)

    async def record(ctx: Tx, events: list[Event]) -> None:
        ran.extend((e.id, ctx.now_ms) for e in events)

    quiet_registry = HandlerRegistry()
    quiet_registry.register(KIND, record)
    noisy_registry = HandlerRegistry()  # knows none of the kinds its world is sent
    builtin.register(noisy_registry)

    clock = ManualClock(START_MS)
    quiet_queue = EventQueue(redis, prefix=quiet.redis_prefix, partitions=4, clock=clock)
    noisy_queue = EventQueue(redis, prefix=noisy.redis_prefix, partitions=4, clock=SYSTEM_CLOCK)
    noisy_engine = create_engine(noisy)
    async with session_factory(noisy_engine)() as session, session.begin():
        stray = await add_durable_events(
            session, [NewEvent("harvest_done", v, SYSTEM_CLOCK.now_ms()) for v in range(8)]
        )
    await noisy_queue.index(stray)
    await _noisy_world(redis, noisy.redis_prefix, noisy_queue, SYSTEM_CLOCK.now_ms())
    async with sessions() as session, session.begin():
        mine = await add_durable_events(
            session,
            [NewEvent(KIND, v, START_MS + 1_000) for v in range(EVENTS)],
            clock=clock, ids=quiet_queue.ids,
        )  # fmt: skip
    await quiet_queue.index(mine)

    caplog.set_level(logging.ERROR, logger="common.queue.worker")
    servers = [
        TaskServer(noisy, noisy_registry, SYSTEM_CLOCK, config=FAST),
        TaskServer(quiet, quiet_registry, clock, config=FAST),
    ]
    tasks = [asyncio.create_task(s.run(), name=f"server {i}") for i, s in enumerate(servers)]
    try:
        await eventually(lambda: _all_started(servers), alive=tasks)

        async def noise_handled() -> bool:  # but in partition 1, whose key is broken
            stats = await noisy_queue.stats([0, 2, 3])
            return all(s.ready == s.inflight == 0 and s.dead > 0 for s in stats)

        await eventually(noise_handled, 30, alive=tasks)
        await clock.set(START_MS + 1_000)  # the quiet world's events are due: only now
        await eventually(lambda: _ran(ran, EVENTS), 30, alive=tasks)
    finally:
        for server in servers:
            server.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        await quiet_queue.aclose()
        await noisy_queue.aclose()
        await noisy_engine.dispose()
        await delete_prefix(redis, noisy.redis_prefix)

    assert sorted(ran) == sorted((e.id, START_MS + 1_000) for e in mine)  # on time, once
    unknown = [r.getMessage() for r in caplog.records if "no handler" in r.getMessage()]
    assert unknown and all("'harvest_done'" in m for m in unknown)
    assert await quiet_queue.dead() == []


async def _all_started(servers: list[TaskServer]) -> bool:
    return all(s.started.is_set() for s in servers)


async def _ran(ran: list[tuple[int, int]], n: int) -> bool:
    return len(ran) >= n
