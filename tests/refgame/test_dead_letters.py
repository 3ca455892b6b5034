"""A dead event holds nothing back, and an operator's drop gives back what its command took.

The reference game's march and build handlers always raise here. Once their events are dead:
stocks are settled at now again (a command elsewhere spends at now), the villages the events
belong to take commands, and dropping the events brings the troops home and refunds the build,
so troops and resources are what they would be had the commands never been sent.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from common.amounts import to_fixed
from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue import Event, EventQueue, NewEvent, RetryPolicy
from common.queue.deadletters import drop, list_dead, requeue
from common.queue.durable import add_durable_events, row_to_event
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.settings import load_settings
from db import events as pending
from db.engine import session_factory
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from gameapi import load_game
from gameapi.testing import GameDriver
from refgame import handlers as game_handlers
from refgame import state
from refgame.commands import build, send_march, train
from refgame.economy import stock_at
from refgame.models import Building, BuildOrder, March
from refgame.resources import STOCKS
from refgame.units import total_upkeep, train_cost
from refgame.world import village_template
from tests.queue.conftest import Workers, eventually

T0 = 1_800_000_000_000
PARTITIONS = 4
BROKEN = (game_handlers.MARCH, game_handlers.BUILD_DONE)


async def always_raises(ctx: Tx, events: list[Event]) -> None:
    raise RuntimeError("a bug in this handler")


def broken_game() -> HandlerRegistry:
    """The reference game with the march and build handlers broken (their compensations kept)."""
    game = HandlerRegistry()
    game_handlers.register(game, load_settings(world_speed=1.0))
    registry = HandlerRegistry()
    for kind in game.kinds():
        reg = game.get(kind)
        assert reg is not None
        broken = kind in BROKEN
        registry.register(
            kind,
            always_raises if broken else reg.handler,
            retry=RetryPolicy(max_attempts=1) if broken else reg.retry,
            max_batch=reg.max_batch,
            compensate=reg.compensate,
        )
    return registry


@pytest.fixture
async def world_workers(redis: Redis, redis_prefix: str) -> AsyncIterator[Workers]:
    running = Workers(redis, redis_prefix)
    yield running
    await running.stop()


async def test_dead_events_hold_nothing_and_a_drop_conserves_troops_and_resources(
    engine: AsyncEngine,
    redis: Redis,
    redis_prefix: str,
    world_workers: Workers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(T0)
    summary = await generate_world(
        engine, players=2, template=village_template(1.0), stocks=STOCKS, shards=1,
        map_radius=3, seed=4,
        clock=clock,
    )  # fmt: skip
    home_id, other_id = summary.first_village_id, summary.last_village_id
    sessions = session_factory(engine)
    async with sessions() as session:
        villages = {v.id: v for v in (await session.execute(select(Village))).scalars()}
        home_stock = await state.stock_row(session, home_id)
        home_troops = await state.troops_home(session, home_id)
    home, other = villages[home_id], villages[other_id]

    driver = GameDriver(load_game("refgame"), engine, clock)
    driver.ids = IdGenerator(clock, node=7)
    await driver.command(build, home.player_id, home_id, "woodcutter")
    sent = await driver.command(
        send_march, home.player_id, home_id, "attack", other.x, other.y, {"legionnaire": 1}
    )
    async with sessions() as session:
        rows = (await session.execute(select(ScheduledEvent))).scalars().all()
    doomed = {row.id: row for row in rows}
    assert {row.kind for row in rows} == set(BROKEN)

    queue = EventQueue(
        redis, prefix=redis_prefix, partitions=PARTITIONS, clock=clock,
        ids=IdGenerator(clock, node=8),
    )  # fmt: skip
    await queue.index(row_to_event(r) for r in rows)
    registry = broken_game()
    for p in range(PARTITIONS):
        world_workers.start(queue, registry, p, sessions=sessions)
    caplog.set_level(logging.WARNING, logger="common.queue.worker")
    await clock.set(max(r.due_ms for r in rows) + 1_000)

    async def all_dead() -> bool:
        async with sessions() as session:
            dead = await session.scalar(
                select(func.count()).where(ScheduledEvent.dead_ms.is_not(None))
            )
        return dead == len(rows)

    await eventually(all_dead)
    # each death is logged (id, kind, reason; never the payload) and counted
    for event_id, row in doomed.items():
        [line] = [
            r.getMessage()
            for r in caplog.records
            if f"event {event_id} " in r.getMessage() and "dead letters" in r.getMessage()
        ]
        assert row.kind in line and "a bug in this handler" in line and "march_id" not in line

    async def counted() -> bool:  # the counter moves once Redis has moved the events
        return len(rows) == sum(
            w.metrics.registry.get_sample_value(
                "gameserver_queue_dead_total", {"partition": str(w.partition)}
            )
            or 0
            for w, _ in world_workers.running
        )

    await eventually(counted)
    letters = await list_dead(queue, sessions)
    assert {d.id for d in letters} == set(doomed)
    assert all(d.error.startswith("RuntimeError: a bug") and d.in_redis for d in letters)

    # nothing is held back: stocks settle at now, and both villages take commands
    now = clock.now_ms()
    async with sessions() as session:
        assert await STOCKS.settle_horizon(session, now) == now
    trained_home = await driver.command(train, home.player_id, home_id, "legionnaire", 1)
    trained_other = await driver.command(train, other.player_id, other_id, "legionnaire", 1)
    assert trained_home["spent_ms"] == now and trained_other["spent_ms"] == now

    # the drop runs the compensations: the legionnaire is home, the build's cost refunded
    outcome = await drop(queue, sessions, registry, doomed)
    assert sorted(outcome.done) == sorted(doomed) and not outcome.not_dead
    async with sessions() as session:
        assert await state.troops_home(session, home_id) == home_troops
        assert await session.get(March, sent["march_id"]) is None
        assert (await session.execute(select(BuildOrder))).first() is None
        home_after = await state.stock_row(session, home_id)
    cost = train_cost("legionnaire", 1).as_dict()
    expected = {r: n - to_fixed(cost[r]) for r, n in stock_at(home_stock, now).items()}
    assert stock_at(home_after, now) == expected
    assert await list_dead(queue, sessions) == []
    assert not (await drop(queue, sessions, registry, doomed)).done  # once only
    assert (await requeue(queue, sessions, doomed)).not_dead == sorted(doomed)


async def test_requeue_runs_a_dead_event_again_even_when_redis_lost_it(
    engine: AsyncEngine, redis: Redis, redis_prefix: str, world_workers: Workers
) -> None:
    clock = ManualClock(T0)
    summary = await generate_world(
        engine, players=1, template=village_template(1.0), stocks=STOCKS, shards=1,
        map_radius=3, seed=4,
        clock=clock,
    )  # fmt: skip
    village_id = summary.first_village_id
    sessions = session_factory(engine)
    async with sessions() as session:
        player_id = (await session.get(Village, village_id)).player_id  # type: ignore[union-attr]
    driver = GameDriver(load_game("refgame"), engine, clock)
    driver.ids = IdGenerator(clock, node=7)
    await driver.command(build, player_id, village_id, "woodcutter")
    async with sessions() as session:
        [row] = (await session.execute(select(ScheduledEvent))).scalars().all()
    queue = EventQueue(
        redis, prefix=redis_prefix, partitions=PARTITIONS, clock=clock,
        ids=IdGenerator(clock, node=8),
    )  # fmt: skip
    await queue.index([row_to_event(row)])
    broken = broken_game()
    worker = world_workers.start(queue, broken, queue.partition_of(village_id), sessions=sessions)
    await clock.set(row.due_ms + 1_000)

    async def dead() -> bool:
        return [d.id for d in await list_dead(queue, sessions)] == [row.id]

    await eventually(dead)
    await world_workers.stop()
    assert worker.stopping
    await queue.drop_dead(queue.partition_of(village_id), row.id)  # Redis lost the entry

    game = HandlerRegistry()
    game_handlers.register(game, load_settings(world_speed=1.0))  # the bug is fixed
    fixed = Workers(redis, redis_prefix)
    try:
        fixed.start(queue, game, queue.partition_of(village_id), sessions=sessions)
        assert (await requeue(queue, sessions, [row.id])).done == [row.id]

        async def built() -> bool:
            async with sessions() as session:
                return await session.get(ScheduledEvent, row.id) is None

        await eventually(built)
    finally:
        await fixed.stop()
    async with sessions() as session:
        level = await session.scalar(
            select(Building.level).where(
                Building.village_id == village_id, Building.kind == "woodcutter"
            )
        )
        assert level == 3


async def test_a_dropped_news_of_losses_stops_their_upkeep_at_once(
    engine: AsyncEngine, redis: Redis, redis_prefix: str
) -> None:
    clock = ManualClock(T0)
    summary = await generate_world(
        engine, players=1, template=village_template(1.0), stocks=STOCKS, shards=1,
        map_radius=3, seed=4,
        clock=clock,
    )  # fmt: skip
    village_id = summary.first_village_id
    sessions = session_factory(engine)
    queue = EventQueue(
        redis, prefix=redis_prefix, partitions=PARTITIONS, clock=clock,
        ids=IdGenerator(clock, node=8),
    )  # fmt: skip
    lost = {"legionnaire": 2}
    async with sessions() as session, session.begin():
        before = (await state.stock_row(session, village_id))["crop_rate"]
        [news] = await add_durable_events(
            session, [NewEvent(game_handlers.TROOPS_LOST, village_id, T0, {"lost": lost})],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
        await pending.mark_dead(session, [(news.id, 5, "RuntimeError: a bug")], T0)
    await clock.advance(60_000)
    registry = HandlerRegistry()
    game_handlers.register(registry, load_settings(world_speed=1.0))
    assert (await drop(queue, sessions, registry, [news.id])).done == [news.id]
    async with sessions() as session:
        row = await state.stock_row(session, village_id)
    assert row["crop_rate"] == before + total_upkeep(lost)
    assert row["updated_ms"] == clock.now_ms()  # from now on, not back at its due time
