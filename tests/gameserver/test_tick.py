"""The tick runner: shard rotation, lease ownership, the scheduler and overruns."""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy import insert, select

from common.amounts import SCALE
from common.clock import ManualClock
from db.models import ScheduledEvent, Village
from gameserver.tick import TickRunner
from refgame.resources import STOCKS
from tests.waiting import wait_for

T0 = 1_700_000_000_000


async def _villages(engine, count: int, shards: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(Village),
            [{"id": v, "name": "v", "x": v, "y": 0, "created_ms": T0} for v in range(1, count + 1)],
        )
        await conn.execute(
            insert(STOCKS.table),
            [
                {
                    "village_id": v, "shard": v % shards, "updated_ms": T0,
                    "wood": 0, "clay": 0, "iron": 0, "crop": 0,
                    "wood_rate": 3600, "clay_rate": 0, "iron_rate": 0, "crop_rate": 0,
                    "warehouse_cap": 10**6 * SCALE, "granary_cap": 10**6 * SCALE,
                }
                for v in range(1, count + 1)
            ],
        )  # fmt: skip


async def _updated(engine) -> dict[int, int]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(STOCKS.c.village_id, STOCKS.c.updated_ms))
        return dict(rows.all())


async def test_each_second_ticks_its_shard_when_owned(engine) -> None:
    await _villages(engine, 12, shards=3)
    clock = ManualClock(T0)
    runner = TickRunner(engine, stocks=STOCKS, shards=3, owns=lambda shard: shard != 2, clock=clock)
    for second in range(1, 7):
        await clock.set(T0 + second * 1000)
        await runner.tick()
    updated = await _updated(engine)
    # the last second of 1..6 that fell on each village's shard; shard 2 is not ours
    expected = {}
    for v in range(1, 13):
        shard = v % 3
        seconds = [s for s in range(1, 7) if ((T0 + s * 1000) // 1000) % 3 == shard]
        expected[v] = T0 + max(seconds) * 1000 if shard != 2 else T0
    assert updated == expected
    assert runner.ticks_run == 4


async def test_scheduler_fires_every_second_and_counts_overruns(engine) -> None:
    await _villages(engine, 4, shards=1)
    runner = TickRunner(engine, stocks=STOCKS, shards=1, owns=lambda shard: True)
    runner.start()
    try:
        await wait_for(lambda: runner.ticks_run >= 1, "a tick fired by the scheduler")
    finally:
        runner.stop()
    assert min((await _updated(engine)).values()) > T0

    slow = TickRunner(engine, stocks=STOCKS, shards=1, owns=lambda shard: True)
    release = asyncio.Event()

    async def stuck(shard: int, now_ms: int) -> int:
        await release.wait()  # past the next second: that tick finds this one still running
        return 0

    slow.run_shard = stuck  # type: ignore[method-assign]
    slow.start()
    try:
        await wait_for(lambda: slow.overruns >= 1, "a tick skipped behind a stuck one")
    finally:
        release.set()
        slow.stop()


async def test_a_horizon_held_back_for_long_names_the_event_in_a_warning(
    engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The tick stops every village at the earliest pending event; when that lasts, the
    operator is told which event it waits for."""
    await _villages(engine, 2, shards=1)
    async with engine.begin() as conn:
        await conn.execute(
            insert(ScheduledEvent).values(
                id=77, kind="march", village_id=2, due_ms=T0 + 500, priority=0, payload=b"",
                created_ms=T0,
            )
        )  # fmt: skip
    clock = ManualClock(T0 + 10_500)
    runner = TickRunner(engine, stocks=STOCKS, shards=1, owns=lambda shard: True, clock=clock)
    caplog.set_level(logging.WARNING, logger="gameserver.tick")
    await runner.tick()
    assert (await _updated(engine))[1] == T0 + 500
    assert runner.metrics.horizon_lag._value.get() == 10.0
    [warning] = [r.getMessage() for r in caplog.records]
    assert "event 77 (march, village 2" in warning
