"""Clock skew: a process whose clock is off Redis TIME says so, and a task server whose clock is
too far off runs no handler and no tick until it is back."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK, ClockCheck, OffsetClock
from common.settings import Settings
from gameserver import builtin
from gameserver.queue import NewEvent
from gameserver.queue.durable import add_durable_events
from gameserver.queue.handlers import HandlerRegistry
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick
from tests.queue.conftest import counts, eventually
from tests.queue.test_taskserver import FAST
from tests.queue.testgame import EFFECT
from tests.queue.testgame.handlers import register
from webfront.app import create_app
from webfront.state import METRICS

ROUND_TRIP_MS = 100  # a local Redis answers TIME well within this


def _offset(registry: CollectorRegistry) -> float:
    value = registry.get_sample_value("webgame_clock_offset_seconds")
    assert value is not None
    return value


async def test_offsets_are_measured_warned_and_refused(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = OffsetClock(SYSTEM_CLOCK, 0)
    registry = CollectorRegistry()
    check = ClockCheck(redis, clock, warn_ms=250, max_ms=2_000, registry=registry)
    caplog.set_level(logging.INFO, logger="common.clock")

    assert abs(await check.check()) < ROUND_TRIP_MS and check.ok
    assert not caplog.records

    clock.offset_ms = 600
    assert abs(await check.check() - 600) < ROUND_TRIP_MS and check.ok
    assert abs(_offset(registry) - 0.6) < ROUND_TRIP_MS / 1000
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING and "+6" in warning.getMessage()

    caplog.clear()
    clock.offset_ms = -3_000
    await check.check()
    assert not check.ok
    assert registry.get_sample_value("webgame_clock_skew_refusing") == 1
    [error] = caplog.records
    assert error.levelno == logging.ERROR and "no handler and no tick" in error.getMessage()

    clock.offset_ms = 0
    await check.check()
    assert check.ok and registry.get_sample_value("webgame_clock_skew_refusing") == 0


async def test_a_skewed_task_server_runs_nothing_until_its_clock_is_back(
    settings: Settings, sessions: async_sessionmaker[AsyncSession]
) -> None:
    small = settings.model_copy(update={"queue_partitions": 2, "tick_shards": 2})
    clock = OffsetClock(SYSTEM_CLOCK, 5_000)
    registry = HandlerRegistry()
    builtin.register(registry)
    register(registry)
    server = TaskServer(small, registry, clock, config=FAST)
    tick = ShardedTick(server)
    async with sessions() as session, session.begin():
        await add_durable_events(
            session, [NewEvent(EFFECT, v, clock.now_ms() - 10_000) for v in range(4)], clock=clock
        )
    task = asyncio.create_task(server.run())
    try:

        async def all_paused() -> bool:
            running = list(server._workers.values())
            return len(running) == 2 and all(r.worker.paused for r in running)

        await eventually(all_paused, alive=[task])
        assert server.clock_check is not None and not server.clock_ok()
        assert abs(_offset(server.metrics.registry) - 5.0) < ROUND_TRIP_MS / 1000
        assert (await counts(sessions))["processed"] == 0  # paused before the first claim
        assert tick.runner is not None and tick.leases is not None
        assert not any(tick.runner.owns(shard) for shard in range(2))

        clock.offset_ms = 0
        await server.clock_check.check()
        assert server.clock_ok()

        async def all_ran() -> bool:
            return (await counts(sessions))["processed"] == 4

        await eventually(all_ran, alive=[task])
    finally:
        server.stop()
        await asyncio.wait_for(task, 15)


async def test_the_web_server_exports_its_offset(settings: Settings) -> None:
    app = create_app(settings, OffsetClock(SYSTEM_CLOCK, -1_500))
    registry = app[METRICS].registry
    async with TestClient(TestServer(app)):

        async def measured() -> bool:
            return _offset(registry) < -1.0

        await eventually(measured)
        assert abs(_offset(registry) + 1.5) < ROUND_TRIP_MS / 1000
