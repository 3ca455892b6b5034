"""Connections kept between transactions (``db.connection_shelf``), on PostgreSQL: reused
without a pool checkout, never handed out closed, in a transaction or past ``keep``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from db.connection_shelf import ConnectionShelf
from tests.waiting import wait_for

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)


def count_checkouts(engine: AsyncEngine) -> list[int]:
    checkouts = [0]

    def checkout(*_: Any) -> None:
        checkouts[0] += 1

    event.listen(engine.sync_engine.pool, "checkout", checkout)
    return checkouts


async def backend_pid(conn: AsyncConnection) -> int:
    return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_a_connection_is_kept_and_taken_again_without_the_pool(engine: AsyncEngine) -> None:
    shelf = ConnectionShelf(engine, keep=2)
    checkouts = count_checkouts(engine)
    async with shelf.connection() as first, first.begin():
        pid = await backend_pid(first)
    async with shelf.connection() as second, second.begin():
        assert second is first and await backend_pid(second) == pid
    assert checkouts[0] == 1 and shelf.idle == [first]
    await shelf.close()
    assert shelf.idle == [] and engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_commands_hold_at_most_keep_connections_and_wait_for_one(
    engine: AsyncEngine,
) -> None:
    shelf = ConnectionShelf(engine, keep=2)
    release = asyncio.Event()
    held: list[AsyncConnection] = []

    async def command() -> AsyncConnection:
        async with shelf.connection() as conn:
            held.append(conn)
            await release.wait()
            return conn

    first = [asyncio.create_task(command()) for _ in range(2)]
    await wait_for(lambda: len(held) == 2, "two commands holding connections")
    third = asyncio.create_task(command())
    for _ in range(5):  # it waits for a held one, not for the pool
        await asyncio.sleep(0)
    assert len(held) == 2 and engine.sync_engine.pool.checkedout() == 2  # type: ignore[attr-defined]
    release.set()
    assert await third in await asyncio.gather(*first)  # it got one of theirs
    assert len(shelf.idle) == 2
    await shelf.close()


async def test_without_a_shelf_each_command_checks_one_out(engine: AsyncEngine) -> None:
    shelf = ConnectionShelf(engine, keep=0)
    async with shelf.connection() as conn, conn.begin():
        await conn.execute(text("SELECT 1"))
    assert conn.closed and shelf.idle == []


async def test_a_connection_left_in_a_transaction_is_not_kept(engine: AsyncEngine) -> None:
    shelf = ConnectionShelf(engine, keep=2)
    async with shelf.connection() as conn:
        await conn.begin()
        await conn.execute(text("SELECT 1"))
    assert shelf.idle == [] and conn.closed  # the pool rolled it back


async def test_a_connection_in_a_failed_block_is_kept_once_its_transaction_ended(
    engine: AsyncEngine,
) -> None:
    shelf = ConnectionShelf(engine, keep=2)
    with pytest.raises(KeyError):
        async with shelf.connection() as conn, conn.begin():
            await conn.execute(text("SELECT 1"))
            raise KeyError("a refusal")
    assert shelf.idle == [conn] and not conn.in_transaction()
    await shelf.close()


async def test_a_connection_the_server_closed_is_not_handed_out(engine: AsyncEngine) -> None:
    shelf = ConnectionShelf(engine, keep=2)
    async with shelf.connection() as kept, kept.begin():
        pid = await backend_pid(kept)
    async with engine.connect() as other:  # a restart, as the kept connection sees it
        await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    driver = kept.sync_connection.connection.dbapi_connection.driver_connection  # type: ignore[union-attr]
    await wait_for(driver.is_closed, "asyncpg to see its connection closed")
    async with shelf.connection() as fresh, fresh.begin():
        assert fresh is not kept and await backend_pid(fresh) != pid
    assert kept.closed and shelf.idle == [fresh]
    await shelf.close()


async def test_a_lost_connection_takes_the_idle_ones_back_to_the_pool(engine: AsyncEngine) -> None:
    """A connection that died without asyncpg knowing fails on its first use: the others on
    the shelf may be dead alike, so they go too (the pool renews its own likewise)."""
    shelf = ConnectionShelf(engine, keep=3)
    for conn in [await shelf._take() for _ in range(3)]:
        await shelf._put_back(conn)
    async with shelf.connection() as conn:
        await conn.invalidate()  # what ``db.driver`` does with a connection found lost
    assert shelf.idle == [] and engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_connection_whose_command_was_cancelled_is_not_kept(engine: AsyncEngine) -> None:
    shelf = ConnectionShelf(engine, keep=2)
    started = asyncio.Event()
    held: list[AsyncConnection] = []

    async def command() -> None:
        async with shelf.connection() as conn, conn.begin():
            held.append(conn)
            started.set()
            await conn.execute(text("SELECT pg_sleep(30)"))

    task = asyncio.create_task(command())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert shelf.idle == [] and held[0].closed
    async with shelf.connection() as conn, conn.begin():  # the next one works
        assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
    await shelf.close()
