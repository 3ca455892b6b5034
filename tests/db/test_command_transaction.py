"""``db.command_transaction``: a command's connection is taken when a statement needs one,
so a command its rules refuse after shared reads takes none; whatever it wrote, on its
connection or in a session, commits when the block ends and rolls back when it raises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import nullcontext
from typing import Any

import pytest
from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from common.ids import IdGenerator
from common.queue.tx import Tx
from common.settings import load_settings
from db import driver
from db.command_transaction import CommandTransaction
from db.connection_shelf import ConnectionShelf
from db.engine import create_engine
from db.models import IdempotentResponse
from db.shared_reads import SharedReads

T = IdempotentResponse.__table__.c
KEYS = select(T.key).where(T.player_id == bindparam("player_id")).order_by(T.key)
COUNT = select(func.count()).select_from(IdempotentResponse.__table__)
LIKE = COUNT.where(T.key.like(bindparam("pattern")))
STORE = insert(IdempotentResponse.__table__).returning(T.key)  # type: ignore[arg-type]


def _row(key: str) -> dict[str, Any]:
    return {"player_id": 1, "key": key, "request_hash": "h", "status": 200, "body": {},
            "created_ms": 1}  # fmt: skip


class Refused(Exception):
    pass


class CountingShelf(ConnectionShelf):
    """A shelf that counts the connections taken from it."""

    taken = 0

    async def take(self) -> Any:
        self.taken += 1
        return await super().take()


@pytest.fixture
async def shelf(engine: AsyncEngine) -> AsyncIterator[CountingShelf]:
    found = CountingShelf(engine, keep=2)
    yield found
    await found.close()


async def _keys(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return list((await conn.execute(KEYS, {"player_id": 1})).scalars())


async def test_writes_commit_at_the_end_and_roll_back_when_it_raises(
    engine: AsyncEngine, shelf: CountingShelf
) -> None:
    async with CommandTransaction(shelf) as command:
        tx = Tx(None, 0, 1.0, IdGenerator(), command=command)
        assert not command.holds_connection
        assert [tuple(r) for r in await tx.rows(STORE, _row("kept"))] == [("kept",)]
        assert command.holds_connection
    with pytest.raises(Refused):
        async with CommandTransaction(shelf) as command:
            tx = Tx(None, 0, 1.0, IdGenerator(), command=command)
            await tx.rows(STORE, _row("undone"))
            raise Refused
    assert await _keys(engine) == ["kept"]
    assert shelf.taken == 2 and len(shelf.idle) == 1  # each went back to the shelf


async def test_a_session_commits_and_rolls_back_with_the_command(
    engine: AsyncEngine, shelf: CountingShelf
) -> None:
    """Asked for before or after the command took its connection, the session joins the
    command's transaction on it."""
    for first in ("statement", "session"):
        for fails in (False, True):
            with pytest.raises(Refused) if fails else nullcontext():
                async with CommandTransaction(shelf) as command:
                    tx = Tx(None, 0, 1.0, IdGenerator(), command=command)
                    if first == "statement":
                        await tx.rows(STORE, _row(f"{first}-{fails}-core"))
                    else:  # its dialect is known without taking the connection
                        assert driver.dialect_name(tx.session) == engine.dialect.name
                        assert not command.holds_connection
                    tx.session.add(IdempotentResponse(**_row(f"{first}-{fails}-orm")))
                    await tx.rows(STORE, _row(f"{first}-{fails}-after"))
                    # the statement and the session's object are in one transaction
                    mine = {"pattern": f"{first}-{fails}-%"}
                    assert (await tx.read(LIKE, mine))[0][0] == 2 + (first == "statement")
                    if fails:
                        raise Refused
    assert await _keys(engine) == [
        "session-False-after", "session-False-orm",
        "statement-False-after", "statement-False-core", "statement-False-orm",
    ]  # fmt: skip
    assert shelf.taken == 4 and len(shelf.idle) == 1  # one each, from the shelf


async def test_a_command_refused_after_shared_reads_takes_no_connection(
    postgres_url: str,
) -> None:
    engine = create_engine(load_settings(database_url=postgres_url))
    shelf = CountingShelf(engine, keep=2)
    shared = SharedReads(ConnectionShelf(engine, keep=1), slots=1, max_batch=8)
    try:
        async with engine.begin() as conn:
            await conn.execute(insert(IdempotentResponse.__table__), _row("a"))  # type: ignore[arg-type]
        with pytest.raises(Refused):
            async with CommandTransaction(shelf) as command:
                tx = Tx(None, 0, 1.0, IdGenerator(), command=command, shared_reads=shared)
                tx.read_along(KEYS, {"player_id": 1})
                assert [tuple(r) for r in await tx.read(COUNT)] == [(1,)]
                assert [tuple(r) for r in tx.along_rows or ()] == [("a",)]
                assert [tuple(r) for r in await tx.read(KEYS, {"player_id": 1})] == [("a",)]
                raise Refused
        assert shelf.taken == 0 and not command.holds_connection
        # a read after the command wrote runs on its own connection: it sees the write
        async with CommandTransaction(shelf) as command:
            tx = Tx(None, 0, 1.0, IdGenerator(), command=command, shared_reads=shared)
            await tx.rows(STORE, _row("b"))
            assert [tuple(r) for r in await tx.read(KEYS, {"player_id": 1})] == [("a",), ("b",)]
        assert shelf.taken == 1
    finally:
        await shared.close()
        await shelf.close()
        await engine.dispose()
