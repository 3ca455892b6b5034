"""Bugs the chaos run found, each pinned by a test: fixed ones failed before their fix,
open ones are strict xfails that turn red once fixed."""

from __future__ import annotations

import asyncpg
import msgpack
import pytest
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi
from sqlalchemy.exc import DBAPIError

from common.amounts import SCALE
from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue import Event, EventQueue, NewEvent
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.queue.worker import is_unavailable
from common.settings import load_settings
from db.engine import (
    create_engine,
    is_database_outage,
    is_transaction_conflict,
    session_factory,
)
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from refgame.commands import build, send_march
from refgame.handlers import HANDLERS, march
from refgame.resources import STOCKS
from refgame.world import village_template
from tests.conftest import TEST_REDIS_URL
from tests.queue.conftest import START_MS, Workers, eventually
from tests.refgame.driver import DriverTx
from webfront.errors import from_exception

T0 = 1_800_000_000_000


async def test_a_retried_event_keeps_its_due_time(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    """Found when PostgreSQL restarted: march arrivals and news of losses that failed once
    ran with ``due_ms`` moved to their retry time, so battles happened (and production
    changed) a second late in game time. A retry may delay the run, never the game time.
    (Since then a database outage no longer counts as a failure; any other one still does.)"""
    seen: list[tuple[int, int]] = []  # (due_ms the handler saw, attempts)

    async def flaky(ctx: Tx, events: list[Event]) -> None:
        for e in events:
            seen.append((e.due_ms, e.attempts))
            if e.attempts == 0:
                raise LookupError("the handler failed once")

    registry = HandlerRegistry()
    registry.register("k", flaky, durable=False)
    await queue.schedule(NewEvent("k", 0, START_MS))
    workers.start(queue, registry, 0)
    await eventually(lambda: _count(seen, 1))
    await eventually(lambda: _waiting_again(queue))
    await clock.advance(1_000)  # the first backoff
    await eventually(lambda: _count(seen, 2))
    assert seen == [(START_MS, 0), (START_MS, 1)]


async def _waiting_again(queue: EventQueue) -> bool:
    [stats] = await queue.stats([0])
    return stats.depth == 1 and stats.inflight == 0


async def _count(items: list[tuple[int, int]], n: int) -> bool:
    return len(items) >= n


@pytest.mark.parametrize("settled_by", ["tick", "command"])
async def test_news_committed_after_its_due_time_still_changes_production_at_that_time(
    postgres_url: str, settled_by: str
) -> None:
    """Found by the chaos run: a follow-up (news of losses, a return with loot) that
    commits after its due time was applied when it ran, not at its due time, when its
    village had been settled meanwhile: nothing held the village for an event that did
    not exist yet (a task server paused mid-batch). The tick and commands now settle no
    village past the earliest pending event (``db.stock.settle_horizon``); the village's
    own events cannot run that far ahead either: the task server's lookahead barrier
    holds them (``tests/queue/test_lookahead.py``)."""
    settings = load_settings(database_url=postgres_url, redis_url=TEST_REDIS_URL)
    engine = create_engine(settings)
    sessions = session_factory(engine)
    ids = IdGenerator()
    try:
        summary = await generate_world(
            engine, stocks=STOCKS, players=2, template=village_template(1.0), shards=1,
            map_radius=3, seed=4, clock=ManualClock(T0),
        )  # fmt: skip
        home, target = summary.first_village_id, summary.last_village_id
        async with engine.connect() as conn:
            owner, x, y = (
                await conn.execute(
                    select(Village.player_id, Village.x, Village.y).where(Village.id == target)
                )
            ).one()
            home_player = (
                await conn.execute(select(Village.player_id).where(Village.id == home))
            ).scalar_one()
        assert home_player is not None
        # one legionnaire attacks a garrison: it dies, and the news of it travels home
        async with sessions() as session, session.begin():
            tx = DriverTx(session, T0, 1.0, ids)
            sent = await send_march(tx, home_player, home, "attack", x, y, {"legionnaire": 1})
            await tx.flush()
        arrive = int(sent["arrive_ms"])
        async with sessions() as battle, battle.begin():
            row = (
                await battle.execute(
                    delete(ScheduledEvent).where(ScheduledEvent.kind == "march")
                    .returning(ScheduledEvent.payload)
                )
            ).scalar_one()  # fmt: skip
            tx = DriverTx(battle, arrive, 1.0, ids)
            await march(tx, target, arrive, msgpack.unpackb(row))
            [news] = [e for e in tx.pending if e["kind"] == "troops_lost"]
            await tx.flush()
            # the battle's transaction is held up past the news' due time (a paused task
            # server); meanwhile the tick or a command settles the home village beyond it
            later = news["due_ms"] + 60_000
            spent = 0
            if settled_by == "tick":
                async with engine.connect() as conn:
                    await STOCKS.tick_shard(conn, 0, later)
                async with sessions() as session, session.begin():
                    tx = DriverTx(session, later, 1.0, ids)
                    order = await build(tx, home_player, home, "cropland")
                    await tx.flush()
                spent = order["cost"]["crop"] * SCALE
        # the news runs (late, as the queue delivers it)
        async with sessions() as session, session.begin():
            await session.execute(delete(ScheduledEvent).where(ScheduledEvent.id == news["id"]))
            tx = DriverTx(session, news["due_ms"], 1.0, ids)
            await HANDLERS["troops_lost"](tx, home, news["due_ms"], {"lost": {"legionnaire": 1}})
        end = news["due_ms"] + 3_600_000
        async with engine.connect() as conn:
            row_end = dict(
                (await conn.execute(select(STOCKS.table).where(
                    STOCKS.c.village_id == home))).one()._mapping
            )  # fmt: skip
        base = village_template(1.0)
        # closed form: the garrison's upkeep until the news, one legionnaire less after it
        rate, crop = base.rates["crop"], base.stock["crop"] * SCALE
        expected = crop + rate * (news["due_ms"] - T0) + (rate + 1) * (end - news["due_ms"])
        expected -= spent
        got = row_end["crop"] + row_end["crop_rate"] * (end - row_end["updated_ms"])
        assert row_end["crop_rate"] == rate + 1
        assert got == expected, f"off by {got - expected} fixed units"
        assert owner is not None
    finally:
        await engine.dispose()


def _translated(error: Exception) -> DBAPIError:
    """An asyncpg error as SQLAlchemy raises it (the exact path of a real connect)."""
    wrapped = AsyncAdapt_asyncpg_dbapi.Error(str(error), error)
    translated = DBAPIError.instance(None, None, wrapped, AsyncAdapt_asyncpg_dbapi.Error)
    assert isinstance(translated, DBAPIError)  # typed StatementError, the wider case
    return translated


def test_a_restarting_database_is_an_outage_not_a_bug() -> None:
    """Found when PostgreSQL restarted: "the database system is not yet accepting
    connections" (SQLSTATE 57P03) arrives as a plain DBAPIError; the web tier answered 500
    with a traceback instead of 503 + Retry-After, and the task server counted it against
    the event as a handler failure."""
    starting = _translated(
        asyncpg.exceptions.CannotConnectNowError(
            "the database system is not yet accepting connections"
        )
    )
    stopping = _translated(asyncpg.exceptions.AdminShutdownError("terminating connection"))
    for exc in (starting, stopping):
        assert is_database_outage(exc) and is_unavailable(exc)
        error = from_exception(exc)
        assert (error.status, error.code, error.headers) == (
            503, "unavailable", {"Retry-After": "1"},
        )  # fmt: skip
    wrong = _translated(asyncpg.exceptions.UndefinedTableError('relation "x" does not exist'))
    assert not is_database_outage(wrong) and not is_unavailable(wrong)
    assert from_exception(wrong).status == 500


def test_a_lost_transaction_race_or_a_raw_driver_outage_counts_no_attempt() -> None:
    """Found by the chaos run under load: two batches deadlocked in PostgreSQL and the battle
    that lost was counted as a failed attempt. A failing event no longer holds the other
    villages (``db.events``), so the battle's news, once it ran, landed late at home. A
    lost race (deadlock, serialization failure, lock timeout) and an outage seen by raw
    asyncpg (the reference game's set-based statements use it) are no event's fault."""
    raw = [
        asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
        asyncpg.exceptions.SerializationError("could not serialize access"),
        asyncpg.exceptions.LockNotAvailableError("canceling statement due to lock timeout"),
    ]
    for exc in [*raw, _translated(raw[0])]:
        assert is_transaction_conflict(exc) and is_unavailable(exc), exc
    for exc in (
        asyncpg.exceptions.AdminShutdownError("terminating connection"),
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
    ):
        assert is_database_outage(exc) and is_unavailable(exc), exc
    assert not is_unavailable(asyncpg.exceptions.UniqueViolationError("duplicate key"))
