"""Exact resources however late the queue runs: the same commands give the same stocks when
the task server runs every event on time and when it runs them all late, with the indexes
of battle news lost after their commit (a broken Redis connection, as the chaos run saw)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue import Event, EventQueue
from common.queue.handlers import HandlerRegistry
from common.queue.reconciler import Reconciler
from common.settings import load_settings
from db.engine import create_engine, session_factory
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from refgame import handlers as game_handlers
from refgame.commands import build, send_march, train
from refgame.resources import STOCKS
from refgame.world import village_template
from tests.queue.conftest import Workers, eventually
from tests.refgame.driver import GameDriver

T0 = 1_800_000_000_000
PARTITIONS = 4
pytestmark = pytest.mark.slow


class LosingQueue(EventQueue):
    """Loses the first index of every news of losses, as a Redis hiccup after the commit
    of its battle would."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost: set[int] = set()

    async def index(self, events: Any) -> int:
        keep: list[Event] = []
        for event in events:
            if event.kind == game_handlers.TROOPS_LOST and event.id not in self.lost:
                self.lost.add(event.id)
            else:
                keep.append(event)
        return await super().index(keep)


async def _world(engine: AsyncEngine) -> GameDriver:
    """Two bot villages. Home sends a horseman to its death at the other's garrison (the news
    comes home fast) and trains three legionnaires one after the other (events of home
    before and after the news); the other builds a field and attacks home."""
    summary = await generate_world(
        engine, stocks=STOCKS, players=2, template=village_template(1.0), shards=1, map_radius=3,
        seed=4, clock=ManualClock(T0),
    )  # fmt: skip
    home, target = summary.first_village_id, summary.last_village_id
    async with engine.connect() as conn:
        rows = (
            await conn.execute(select(Village.id, Village.player_id, Village.x, Village.y))
        ).all()
    at = {r.id: r for r in rows}
    driver = GameDriver(engine, ManualClock(T0))
    driver.ids = IdGenerator(driver.clock, node=7)
    me, them = at[home], at[target]
    await driver.command(
        send_march, me.player_id, home, "attack", them.x, them.y, {"equites_imperatoris": 1}
    )
    for _ in range(3):
        await driver.command(train, me.player_id, home, "legionnaire", 1)
    await driver.command(build, them.player_id, target, "cropland")
    await driver.command(
        send_march, them.player_id, target, "attack", me.x, me.y, {"praetorian": 3}
    )
    return driver


async def _stocks(engine: AsyncEngine, at_ms: int) -> dict[int, tuple[int, ...]]:
    async with engine.begin() as conn:
        ids = [v for (v,) in await conn.execute(select(STOCKS.c.village_id))]
        await STOCKS.settle(conn, ids, at_ms)
        rows = await conn.execute(select(STOCKS.table).order_by(STOCKS.c.village_id))
        return {r.village_id: tuple(r)[2:] for r in rows}


async def _pending(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int(
            (await conn.execute(select(func.count()).select_from(ScheduledEvent))).scalar_one()
        )


async def test_a_late_queue_that_lost_indexes_gives_the_stocks_of_an_on_time_run(
    db_url: str, tmp_path: Path, sqlite_template: Path, redis: Redis, redis_prefix: str
) -> None:
    # the reference: every event run on time, in order, by the in-process driver
    reference_url = f"sqlite+aiosqlite:///{tmp_path / 'reference.db'}"
    reference_path = tmp_path / "reference.db"
    reference_path.write_bytes(sqlite_template.read_bytes())
    reference = create_engine(load_settings(database_url=reference_url))
    late = create_engine(load_settings(database_url=db_url))
    workers = Workers(redis, redis_prefix)
    try:
        on_time = await _world(reference)
        end = T0 + 3 * 3_600_000  # every march arrived and came back, every build is done
        assert await on_time.run_until(end) > 0
        assert ("troops_lost", 1) in {(kind, v) for kind, v, _ in on_time.events_run}
        expected = await _stocks(reference, end)

        await _world(late)
        clock = ManualClock(end)  # the task server starts when everything is overdue
        sessions = session_factory(late)
        queue = LosingQueue(
            redis, prefix=redis_prefix, partitions=PARTITIONS, clock=clock,
            ids=IdGenerator(clock, node=8),
        )  # fmt: skip
        registry = HandlerRegistry()
        game_handlers.register(registry, load_settings(world_speed=1.0))
        reconciler = Reconciler(queue, sessions, lambda: range(PARTITIONS))
        await reconciler.reconcile(range(PARTITIONS))  # the commands' events
        for p in range(PARTITIONS):
            workers.start(queue, registry, p, sessions=sessions)

        polls = 0

        async def drained() -> bool:
            nonlocal polls
            polls += 1
            await clock.advance(100)  # held-back partitions claim again 100 ms later
            if polls % 20 == 0:  # the reconciler's overdue sweep, every 2 s of game time
                await reconciler.reconcile(range(PARTITIONS), due_before=clock.now_ms() - 2_000)
            return await _pending(late) == 0

        await eventually(drained, 60)
        assert queue.lost, "the test lost no index: it proves nothing"
        assert await _stocks(late, end) == expected
    finally:
        await workers.stop()
        await reference.dispose()
        await late.dispose()
