"""Database connections kept between transactions, so each does not check one out of the pool.

A web command's transaction runs on an ``AsyncConnection``. Taking one from SQLAlchemy's
pool and giving it back crosses the greenlet bridge twice and runs the pool's checkout and
checkin (events, reset): at a few hundred µs of CPU per command that was a quarter of a
refusal, which makes no more than its reads. Users hold up to ``keep`` connections, kept
checked out between their transactions: one takes an idle connection from the shelf and
puts it back, both plain list operations; only while fewer than ``keep`` exist does it go
to the pool for one, and past ``keep`` it waits for one to come back. (The web tier keeps
20 for its commands. The task server's partition workers keep none: tried, a world's task
server CPU per event did not change measurably; its batches' cost lies elsewhere.)

What the pool would have done at checkout is done here at take: a connection the server
closed (a restart, an idle timeout; ``db.engine.closed_by_server``, as the pool's checkout
asks) is let go and the next one taken. A connection invalidated
meanwhile (a lost connection, ``db.driver``) goes back to the pool, which discards it, and
takes the idle ones with it, as the pool renews all of its own when it sees one lost; one
still in a transaction (it must not be: ``begin()``'s block ends it) goes back to be reset.
A transaction cancelled in the middle of a statement leaves nothing on the shelf either:
asyncpg closes a connection whose statement was cancelled, which the checks above see.
``keep`` stays below the pool's size, so the pool always has connections for everything
else (logins, reports, health checks). ``keep=0``: no shelf (a checkout each time).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from db.engine import closed_by_server


class ConnectionShelf:
    def __init__(self, engine: AsyncEngine, keep: int) -> None:
        self.engine = engine
        self.keep = keep
        self.idle: list[AsyncConnection] = []
        # Commands hold at most ``keep`` connections: one more waits here for one of them,
        # not in the pool's queue, where a connection idle on the shelf would never reach it
        self._slots = asyncio.Semaphore(keep)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one transaction (or reads); back on the shelf when the block ends."""
        conn = await self.take()
        try:
            yield conn
        finally:
            await self.give_back(conn)

    async def take(self) -> AsyncConnection:
        """A connection for one transaction; ``give_back`` it when the transaction ended."""
        if not self.keep:  # no shelf: the pool's connection, as everywhere else
            return await self.engine.connect()
        await self._slots.acquire()
        try:
            return await self._take()
        except BaseException:
            self._slots.release()
            raise

    async def give_back(self, conn: AsyncConnection) -> None:
        if not self.keep:
            await conn.close()
            return
        try:
            await self._put_back(conn)
        finally:
            self._slots.release()

    async def _take(self) -> AsyncConnection:
        while self.idle:
            conn = self.idle.pop()
            if _usable(conn):
                return conn
            await conn.close()  # back to the pool, which replaces it
        return await self.engine.connect()

    async def _put_back(self, conn: AsyncConnection) -> None:
        if conn.invalidated:
            # it was lost (``db.driver``): the others may be dead alike without knowing it,
            # as the pool assumes of its own when it sees one lost
            await self.close()
        if _usable(conn) and not conn.in_transaction():
            self.idle.append(conn)
        else:
            await conn.close()

    async def close(self) -> None:
        """Give every idle connection back to the pool (before the engine is disposed)."""
        idle, self.idle = self.idle, []
        for conn in idle:
            await conn.close()


def _usable(conn: AsyncConnection) -> bool:
    if conn.closed or conn.invalidated:
        return False
    dbapi = conn.sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
    return not closed_by_server(dbapi)
