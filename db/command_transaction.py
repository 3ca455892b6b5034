"""A command's transaction, on a connection taken when a statement first needs one.

A command reads, judges by its rules, and writes last. Its reads before its transaction
sends BEGIN run on shared connections (``db.shared_reads``), so a command its rules refuse
after its reads needs no connection of its own at all, and taking one from the shelf and
giving it back (a wait for one of its slots while others hold them, the transaction's
begin and end) would be most of what is left of a refusal's cost. So the connection is
taken, and its transaction begun (``db.driver.transaction``), when a statement needs it: a
write, a read that locks, a read after BEGIN, or a read where reads are not shared (SQLite).

A session the game asks for (``Tx.session``) joins the command's transaction on that
connection, asked for before or after the command took it: its first statement takes it.
The transaction commits when the block ends and rolls back when it raises.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Session
from sqlalchemy.util.concurrency import await_only, in_greenlet

from db import driver
from db.connection_shelf import ConnectionShelf


class CommandTransaction:
    __slots__ = ("_session", "_shelf", "_taken")

    def __init__(self, shelf: ConnectionShelf) -> None:
        self._shelf = shelf
        # the connection from the shelf and its begun transaction, once taken
        self._taken: tuple[AsyncConnection, AbstractAsyncContextManager[None]] | None = None
        self._session: AsyncSession | None = None

    @property
    def dialect(self) -> Dialect:
        return self._shelf.engine.dialect

    @property
    def holds_connection(self) -> bool:
        """Has it taken its connection yet? Until then nothing of the command ran in its
        transaction, and its reads may be shared."""
        return self._taken is not None

    async def connection(self) -> AsyncConnection:
        """The transaction's connection, taken (and its transaction begun) on the first ask."""
        if self._taken is not None:
            return self._taken[0]
        conn = await self._shelf.take()
        began = driver.transaction(conn)
        try:
            await began.__aenter__()
        except BaseException:
            await self._shelf.give_back(conn)
            raise
        self._taken = (conn, began)
        return conn

    def session(self) -> AsyncSession:
        """The transaction's ORM session, made on the first ask."""
        if self._session is None:
            self._session = AsyncSession(
                sync_session_class=_CommandSession,
                expire_on_commit=False,
                info={_COMMAND: self},
            )
        return self._session

    async def __aenter__(self) -> CommandTransaction:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Commit, or roll back when the block raised; the connection goes back either way."""
        if self._session is not None:  # its objects; the transaction it joined ends below
            await self._session.close()
        if self._taken is None:
            return  # nothing ran in it
        conn, began = self._taken
        try:
            await began.__aexit__(kind, error, trace)
        finally:
            await self._shelf.give_back(conn)


_COMMAND = "db.command_transaction.command"  # the key of a session's command in its info


class _CommandSession(Session):
    """A session on its command's connection, which its first statement takes."""

    def get_bind(self, *args: Any, **kw: Any) -> Engine | Connection:
        command: CommandTransaction = self.info[_COMMAND]
        if command._taken is not None:
            conn = command._taken[0]
        elif not in_greenlet():  # asked outside a statement (for its dialect): take nothing
            return command._shelf.engine.sync_engine
        else:
            conn = await_only(command.connection())
        assert conn.sync_connection is not None
        return conn.sync_connection
