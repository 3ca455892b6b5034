"""``db.shared_writes`` and ``db.set_writes``: commands' closing statements written together,
one set-based statement per batch, each closing's outcome its own (PostgreSQL: the driver's
fast path)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Integer, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.settings import load_settings
from db import driver
from db.connection_shelf import ConnectionShelf
from db.engine import create_engine
from db.models import IdempotentResponse
from db.set_writes import lock_order
from db.shared_writes import SharedWrites
from refgame.resources import STOCKS
from tests.calls import record_calls
from tests.waiting import wait_for

T = IdempotentResponse.__table__.c
STORE = insert(IdempotentResponse.__table__)  # type: ignore[arg-type]
READ = select(T.key, T.status, T.body).where(T.player_id == 7).order_by(T.key)
# a guard: the row of ``claim_key`` gets ``claim_status``, if its status is still 200
CLAIM = (
    update(IdempotentResponse.__table__)  # type: ignore[arg-type]
    .where(T.player_id == 7, T.key == bindparam("claim_key"), T.status == 200)
    .values(status=bindparam("claim_status", type_=Integer))
    .returning(T.key)
)


def _row(key: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"player_id": 7, "key": key, "request_hash": "h", "status": 200,
            "body": body or {}, "created_ms": 1}  # fmt: skip


def _claim(key: str, status: int) -> list[driver.Guard]:
    return [(CLAIM, {"claim_key": key, "claim_status": status})]


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(load_settings(database_url=postgres_url))
    async with engine.begin() as conn:
        for key in "abc":
            await conn.execute(STORE, _row(key))
    yield engine
    await engine.dispose()


@pytest.fixture
async def shared(pg: AsyncEngine) -> AsyncIterator[SharedWrites]:
    writes = SharedWrites(ConnectionShelf(pg, keep=1), slots=1, max_batch=64)
    yield writes
    await writes.close()


async def _rows(pg: AsyncEngine) -> dict[str, tuple[int, Any]]:
    async with pg.connect() as conn:
        return {key: (status, body) for key, status, body in await driver.rows(conn, READ)}


async def test_closings_handed_over_together_are_one_statement_each_with_its_outcome(
    pg: AsyncEngine, shared: SharedWrites, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = record_calls(monkeypatch, asyncpg.Connection, "fetch")
    held = await asyncio.gather(
        shared.write([(STORE, _row("n1", {"x": [1, "é"]}))], _claim("a", 201)),
        shared.write([(STORE, _row("n2"))], _claim("missing", 201)),  # touches no row
        shared.write([(STORE, _row("n3"))], _claim("b", 202)),
        shared.write([(STORE, _row("n4"))], _claim("a", 203)),  # the same row as the first
    )
    assert len(sent) == 1  # one statement, committed by itself
    assert held == [True, False, True, False]  # one of two guards on a row touches it
    assert await _rows(pg) == {
        "a": (201, {}), "b": (202, {}), "c": (200, {}),
        "n1": (200, {"x": [1, "é"]}), "n3": (200, {}),
    }  # fmt: skip


async def test_closings_without_a_guard_are_all_written(
    pg: AsyncEngine, shared: SharedWrites, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = record_calls(monkeypatch, asyncpg.Connection, "fetch")
    rows = [[(STORE, _row(f"k{i}")), (STORE, _row(f"l{i}"))] for i in range(3)]
    assert await asyncio.gather(*(shared.write(r, []) for r in rows)) == [True] * 3
    assert len(sent) == 1
    assert set(await _rows(pg)) == {"a", "b", "c", "k0", "k1", "k2", "l0", "l1", "l2"}


async def test_a_closing_that_fails_the_statement_fails_alone(
    pg: AsyncEngine, shared: SharedWrites
) -> None:
    answers = await asyncio.gather(
        shared.write([(STORE, _row("n1"))], _claim("a", 201)),
        shared.write([(STORE, _row("c"))], _claim("b", 202)),  # its key exists: a repeat
        shared.write([(STORE, _row("n3"))], _claim("missing", 203)),
        return_exceptions=True,
    )
    assert answers[0] is True and answers[2] is False
    assert isinstance(answers[1], IntegrityError)
    # run alone, the failed one's guard was rolled back with it
    assert await _rows(pg) == {"a": (201, {}), "b": (200, {}), "c": (200, {}), "n1": (200, {})}


async def test_closings_of_other_shapes_are_written_apart(
    pg: AsyncEngine, shared: SharedWrites, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = record_calls(monkeypatch, asyncpg.Connection, "fetch")
    held = await asyncio.gather(
        shared.write([(STORE, _row("n1"))], _claim("a", 201)),
        shared.write([(STORE, _row("n2"))], []),
        shared.write([(STORE, _row("n3"))], _claim("b", 202)),
    )
    assert held == [True, True, True]
    assert len(sent) == 2  # the two with a guard together, the other alone
    assert set(await _rows(pg)) == {"a", "b", "c", "n1", "n2", "n3"}


async def test_a_guard_with_an_untyped_parameter_is_written_closing_by_closing(
    pg: AsyncEngine, shared: SharedWrites
) -> None:
    untyped = (
        update(IdempotentResponse.__table__)  # type: ignore[arg-type]
        .where(T.player_id == 7, T.key == bindparam("claim_key", type_=T.key.type))
        .values(status=bindparam("claim_status"))  # no type: no array of it can be made
        .returning(T.key)
    )
    held = await asyncio.gather(
        shared.write([(STORE, _row("n1"))], [(untyped, {"claim_key": "a", "claim_status": 5})]),
        shared.write([(STORE, _row("n2"))], [(untyped, {"claim_key": "x", "claim_status": 5})]),
    )
    assert held == [True, False]
    assert await _rows(pg) == {"a": (5, {}), "b": (200, {}), "c": (200, {}), "n1": (200, {})}


async def test_closings_within_the_gather_window_wait_for_one_statement(
    pg: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    shared = SharedWrites(ConnectionShelf(pg, keep=1), 1, 64, gather_ms=10, clock=clock)
    sent = record_calls(monkeypatch, asyncpg.Connection, "fetch")
    try:
        assert await shared.write([(STORE, _row("n1"))], [])  # a quiet process: at once
        assert len(sent) == 1
        later = [
            asyncio.ensure_future(shared.write([(STORE, _row(f"m{i}"))], [])) for i in range(3)
        ]
        await wait_for(clock.slept_on, "a runner gathering")  # the clock standing still
        assert not any(f.done() for f in later) and len(sent) == 1
        await clock.advance(10)
        assert await asyncio.gather(*later) == [True] * 3
        assert len(sent) == 2  # the three in one statement
    finally:
        await shared.close()


async def test_a_closing_with_two_guards_is_not_taken(shared: SharedWrites) -> None:
    assert not shared.takes([*_claim("a", 1), *_claim("b", 1)])
    with pytest.raises(ValueError, match="own transaction"):
        await shared.write([(STORE, _row("n1"))], [*_claim("a", 1), *_claim("b", 1)])


async def test_a_batch_locks_its_rows_in_the_order_of_its_guards_key(
    pg: AsyncEngine, shared: SharedWrites, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batches that meet the same rows lock them in one order (no deadlock between two
    writers): the closings are sorted by the guard's WHERE parameters, its key first."""
    assert lock_order(CLAIM) == ["claim_key"]
    spend = STOCKS.spend_at(1, {"wood": 1}, 0, "postgresql")[0]
    assert lock_order(spend)[0] == "spend_village"
    ran: list[Any] = []
    rows = driver.rows

    async def recorded(conn: Any, statement: Any, params: Any = None, **kw: Any) -> Any:
        ran.append(params)
        return await rows(conn, statement, params, **kw)

    monkeypatch.setattr(driver, "rows", recorded)
    held = await asyncio.gather(
        *(shared.write([(STORE, _row(f"n{key}"))], _claim(key, 201)) for key in "cba")
    )
    assert held == [True, True, True]  # each its own outcome, whatever the order written
    [params] = ran
    assert params["g_claim_key"] == ["a", "b", "c"]
    assert params["w0_key"] == ["na", "nb", "nc"]
