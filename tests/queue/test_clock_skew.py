"""Clock skew: a process whose clock is off Redis TIME says so, and a task server whose clock is
too far off runs no handler and no tick until it is back."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK, Clock, ClockCheck, OffsetClock
from common.queue import NewEvent
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from gameserver import builtin
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick
from tests.queue.conftest import counts, eventually
from tests.queue.test_taskserver import FAST
from tests.queue.testgame import EFFECT
from tests.queue.testgame.handlers import register
from webfront.app import create_app
from webfront.state import METRICS

ROUND_TRIP_MS = 200  # a local Redis answers TIME well within this, even on a busy host


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

    def said() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "common.clock"]

    assert abs(await check.check()) < ROUND_TRIP_MS and check.ok
    assert not said()

    clock.offset_ms = 600
    assert abs(await check.check() - 600) < ROUND_TRIP_MS and check.ok
    assert abs(_offset(registry) - 0.6) < ROUND_TRIP_MS / 1000
    [warning] = said()
    assert warning.levelno == logging.WARNING
    # the offset it names is the measured one: 600 ms, give or take the round trip
    said_ms = re.search(r"clock is ([+-]\d+) ms off", warning.getMessage())
    assert said_ms is not None, warning.getMessage()
    assert abs(int(said_ms.group(1)) - 600) < ROUND_TRIP_MS

    caplog.clear()
    clock.offset_ms = -3_000
    await check.check()
    assert not check.ok
    assert registry.get_sample_value("webgame_clock_skew_refusing") == 1
    [error] = said()
    assert error.levelno == logging.ERROR and "no handler and no tick" in error.getMessage()

    clock.offset_ms = 0
    await check.check()
    assert check.ok and registry.get_sample_value("webgame_clock_skew_refusing") == 0


async def test_a_skewed_task_server_hands_its_work_over_until_its_clock_is_back(
    settings: Settings, sessions: async_sessionmaker[AsyncSession]
) -> None:
    small = settings.model_copy(update={"queue_partitions": 2, "tick_shards": 2})
    skewed_clock = OffsetClock(SYSTEM_CLOCK, 5_000)

    def server(clock: Clock) -> tuple[TaskServer, ShardedTick]:
        registry = HandlerRegistry()
        builtin.register(registry)
        register(registry)
        made = TaskServer(small, registry, clock, config=FAST)
        return made, ShardedTick(made)

    skewed, skewed_tick = server(skewed_clock)
    async with sessions() as session, session.begin():
        await add_durable_events(
            session,
            [NewEvent(EFFECT, v, SYSTEM_CLOCK.now_ms() - 10_000) for v in range(4)],
            clock=SYSTEM_CLOCK,
        )
    servers = [skewed]
    tasks = [asyncio.create_task(skewed.run(), name="skewed task server")]
    try:
        await eventually(lambda: _true(skewed.started.is_set()), alive=tasks)
        # refused from its first check on: it never held a partition, a shard or a job
        assert skewed.clock_check is not None and not skewed.clock_ok()
        assert abs(_offset(skewed.metrics.registry) - 5.0) < ROUND_TRIP_MS / 1000
        assert skewed.held == frozenset() and (await counts(sessions))["processed"] == 0
        assert skewed_tick.leases is not None and skewed_tick.leases.held == frozenset()

        # a healthy server runs the world meanwhile: nothing waits for the skewed one
        healthy, healthy_tick = server(SYSTEM_CLOCK)
        servers.append(healthy)
        tasks.append(asyncio.create_task(healthy.run(), name="healthy task server"))

        async def all_ran() -> bool:
            return (await counts(sessions))["processed"] == 4

        await eventually(all_ran, alive=tasks)
        assert healthy.held == frozenset({0, 1}) and skewed.held == frozenset()

        async def healthy_ticks_all() -> bool:
            leases = healthy_tick.leases
            return leases is not None and leases.held == frozenset({0, 1})

        await eventually(healthy_ticks_all, alive=tasks)

        # the clock is back: the skewed server takes its share again
        skewed_clock.offset_ms = 0
        await skewed.clock_check.check()
        assert skewed.clock_ok()

        async def shared() -> bool:
            return len(skewed.held) == 1 and len(healthy.held) == 1

        await eventually(shared, alive=tasks)
    finally:
        for running in servers:
            running.stop()
        for task in tasks:
            await asyncio.wait_for(task, 15)


async def _true(value: bool) -> bool:
    return value


async def test_the_web_server_exports_its_offset(settings: Settings) -> None:
    app = create_app(settings, OffsetClock(SYSTEM_CLOCK, -1_500))
    registry = app[METRICS].registry
    async with TestClient(TestServer(app)):

        async def measured() -> bool:
            return _offset(registry) < -1.0

        await eventually(measured)
        assert abs(_offset(registry) + 1.5) < ROUND_TRIP_MS / 1000
