"""``db.shared_reads``: commands' reads before BEGIN, the same statement of many in one round
trip, each command's rows apart, one command's bad read failing that command only
(PostgreSQL: the driver's fast path)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import bindparam, insert, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from common.settings import load_settings
from db import driver
from db.connection_shelf import ConnectionShelf
from db.engine import create_engine
from db.models import IdempotentResponse
from db.shared_reads import SharedReads
from tests.calls import record_calls

T = IdempotentResponse.__table__.c
KEYS = select(T.key, T.body).where(T.player_id == bindparam("player_id")).order_by(T.key)


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(load_settings(database_url=postgres_url))
    async with engine.begin() as conn:
        for player_id, keys in ((1, "ab"), (2, "c"), (3, "")):
            for key in keys:
                await conn.execute(
                    insert(IdempotentResponse.__table__),  # type: ignore[arg-type]
                    {"player_id": player_id, "key": key, "request_hash": "h", "status": 200,
                     "body": {"k": key}, "created_ms": 1},
                )  # fmt: skip
    yield engine
    await engine.dispose()


@pytest.fixture
async def shared(pg: AsyncEngine) -> AsyncIterator[SharedReads]:
    reads = SharedReads(ConnectionShelf(pg, keep=1), slots=1, max_batch=64)
    yield reads
    await reads.close()


async def _read(conn: Any, shared: SharedReads | None, player_id: Any) -> list[tuple[Any, ...]]:
    rows = await driver.rows(conn, KEYS, {"player_id": player_id}, begin=False, shared=shared)
    return [tuple(r) for r in rows]


async def test_reads_asked_together_run_in_one_round_trip_each_with_its_rows(
    pg: AsyncEngine, shared: SharedReads, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pg.connect() as conn:
        alone = [await _read(conn, None, p) for p in (1, 2, 3)]  # each on its own
        pipelined = record_calls(monkeypatch, asyncpg.Connection, "fetchmany")
        together = await asyncio.gather(*(_read(conn, shared, p) for p in (1, 2, 3, 1)))
    assert together == [*alone, alone[0]]
    assert alone[0] == [("a", {"k": "a"}), ("b", {"k": "b"})] and alone[2] == []
    assert len(pipelined) == 1 and len(pipelined[0][2]) == 4  # one round trip, four runs


async def test_a_bad_read_fails_only_its_own_command(pg: AsyncEngine, shared: SharedReads) -> None:
    async with pg.connect() as conn:
        answers = await asyncio.gather(
            _read(conn, shared, 1), _read(conn, shared, 2**63), _read(conn, shared, 2),
            return_exceptions=True,
        )  # fmt: skip
    assert answers[0] == [("a", {"k": "a"}), ("b", {"k": "b"})]
    assert isinstance(answers[1], DBAPIError)  # out of a BIGINT's range
    assert answers[2] == [("c", {"k": "c"})]


async def test_a_cancelled_read_leaves_the_others_answered(
    pg: AsyncEngine, shared: SharedReads
) -> None:
    async with pg.connect() as conn:
        first = asyncio.ensure_future(_read(conn, shared, 1))
        gone = asyncio.ensure_future(_read(conn, shared, 2))
        last = asyncio.ensure_future(_read(conn, shared, 2))
        await asyncio.sleep(0)  # all three are waiting
        gone.cancel()
        assert await first == [("a", {"k": "a"}), ("b", {"k": "b"})]
        assert await last == [("c", {"k": "c"})]
    assert gone.cancelled()


async def test_a_transaction_that_began_reads_on_its_own_connection(
    pg: AsyncEngine, shared: SharedReads, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pg.connect() as conn:
        async with driver.transaction(conn):
            await driver.rows(
                conn,
                insert(IdempotentResponse.__table__),  # type: ignore[arg-type]
                {"player_id": 3, "key": "own", "request_hash": "h", "status": 200, "body": {},
                 "created_ms": 1},
            )  # fmt: skip
            asked = record_calls(monkeypatch, SharedReads, "read")
            assert await _read(conn, shared, 3) == [("own", {})]  # its own write, uncommitted
            assert asked == []
        assert await _read(conn, shared, 3) == [("own", {})]  # committed: shared again
        assert len(asked) == 1


async def test_reads_with_the_frameworks_along_are_shared_too(
    pg: AsyncEngine, shared: SharedReads, monkeypatch: pytest.MonkeyPatch
) -> None:
    along = select(T.status, T.body).where(
        T.player_id == bindparam("player_id"), T.key == bindparam("key")
    )

    async def both(conn: Any, player_id: int, key: str) -> tuple[list[Any], list[Any]]:
        found = await driver.rows_along(
            conn, KEYS, {"player_id": player_id}, along, {"player_id": 1, "key": key}, shared
        )
        assert found is not None
        return [tuple(r) for r in found[0]], [tuple(r) for r in found[1]]

    async with pg.connect() as conn:
        pipelined = record_calls(monkeypatch, asyncpg.Connection, "fetchmany")
        answers = await asyncio.gather(both(conn, 1, "b"), both(conn, 2, "none"))
    assert answers == [
        ([("a", {"k": "a"}), ("b", {"k": "b"})], [(200, {"k": "b"})]),
        ([("c", {"k": "c"})], []),
    ]
    assert len(pipelined) == 1
