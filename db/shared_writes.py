"""Commands' closing statements, many at once: one set-based statement per batch.

A command that wrote nothing before its closing statement (``Tx.write_kept``: its guard,
the rows it inserts, its events and idempotency record) commits with that one
statement, alone; no connection of its own is needed for it. ``SharedWrites.write``
hands it over instead: closings of the same shape (the same statements with the same
parameter names, as every command of one route has) that wait together run as one
statement (``db.set_writes``) on a connection of its own (``slots`` of them, kept on a
``ConnectionShelf``), committed once. A closing is taken at once in a quiet process, and
within ``gather_ms`` of the last batch it waits for the next (``common.batch_slots``): the
busier the process, the more closings a statement and a commit carry.

Each closing's outcome is its own: True when its guard held and its rows are written,
False when its guard touched no row (nothing of it is written: the command runs again).
When a batch's statement fails (one command's idempotency key repeated, a value out of
range), each of its closings runs again alone, so the failure reaches only the command
it belongs to; a lost connection fails them all as an outage, which each command handles
as it would its own (``webfront.commands``). Closings with more than one guard are not
taken (two guards may half hold, which needs the command's own transaction to undo).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.expression import Executable

from common.batch_slots import BatchSlots
from common.clock import SYSTEM_CLOCK, Clock
from db import driver, set_writes
from db.connection_shelf import ConnectionShelf
from db.engine import is_database_outage

# a closing's statements, each with the sorted names of its values or parameters
_Shape = tuple[tuple[tuple[int, tuple[str, ...]], ...], tuple[int, tuple[str, ...]] | None]


@dataclass
class _Closing:
    writes: Sequence[driver.Write]
    guard: driver.Guard | None
    done: asyncio.Future[bool]


@dataclass(frozen=True)
class _Built:
    statement: Executable | None
    lock_order: list[str]
    given: tuple[Executable, ...]


def _sort_key(closing: _Closing, names: list[str]) -> tuple[tuple[bool, Any], ...]:
    params = closing.guard[1] if closing.guard is not None else {}
    return tuple((params[name] is None, params[name]) for name in names)


class _NotHeld(Exception):
    """A closing run alone whose guard touched no row: its transaction rolls back."""


class SharedWrites:
    def __init__(
        self,
        shelf: ConnectionShelf,
        slots: int,
        max_batch: int,
        gather_ms: int = 0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.shelf = shelf
        self.max_batch = max_batch
        # by shape, oldest first: the closings waiting to be written
        self.waiting: dict[_Shape, list[_Closing]] = {}
        # by shape: the set-based statement (None: the shape cannot be one), the guard's
        # parameters its closings are sorted by, and what it was built from (the cache is
        # keyed by id(): held, and checked, so an id is not reused)
        self.statements: dict[_Shape, _Built] = {}
        # for metrics: closings handed over, and the statements that wrote them (a batch's
        # set-based statement, or one per closing run alone)
        self.closings = 0
        self.statements_run = 0
        self.runners = BatchSlots(slots, self._run, lambda: bool(self.waiting), gather_ms, clock)

    @property
    def dialect(self) -> Dialect:
        return self.shelf.engine.dialect

    @staticmethod
    def takes(guards: Sequence[driver.Guard]) -> bool:
        """Can a closing with ``guards`` be written here? (One guard at most.)"""
        return len(guards) <= 1

    async def write(self, writes: Sequence[driver.Write], guards: Sequence[driver.Guard]) -> bool:
        """Write a closing (``driver.write_all`` with ``last=True``, committed): True when its
        guard held (or it has none) and its rows are written; False when nothing is."""
        if not self.takes(guards):
            raise ValueError("a closing with more than one guard needs its own transaction")
        guard = guards[0] if guards else None
        shape: _Shape = (
            tuple((id(statement), tuple(sorted(values))) for statement, values in writes),
            None if guard is None else (id(guard[0]), tuple(sorted(guard[1]))),
        )
        closing = _Closing(writes, guard, asyncio.get_running_loop().create_future())
        self.closings += 1
        self.waiting.setdefault(shape, []).append(closing)
        self.runners.wake()
        return await closing.done

    async def _run(self) -> None:
        # The batch is taken when the task runs: closings handed over in the same loop
        # iteration join it.
        batch: list[_Closing] = []
        try:
            if self.waiting:
                shape = next(iter(self.waiting))
                waiting = self.waiting.pop(shape)
                batch, rest = waiting[: self.max_batch], waiting[self.max_batch :]
                if rest:
                    self.waiting[shape] = rest
                batch = [closing for closing in batch if not closing.done.done()]
                if batch:
                    async with self.shelf.connection() as conn:
                        await self._write(conn, shape, batch)
        except asyncio.CancelledError:
            for closing in batch:
                closing.done.cancel()
            raise
        except Exception as exc:  # no connection to write them on: each command is told
            _fail(batch, exc)

    async def _write(self, conn: AsyncConnection, shape: _Shape, batch: list[_Closing]) -> None:
        built = self._built(shape, batch[0]) if len(batch) > 1 else None
        if built is not None and built.statement is not None:
            statement = built.statement
            if built.lock_order:
                batch.sort(key=lambda c: _sort_key(c, built.lock_order))
            guards = None if batch[0].guard is None else [c.guard[1] for c in batch]  # type: ignore[index]
            params = set_writes.arguments([[v for _, v in c.writes] for c in batch], guards)
            self.statements_run += 1
            try:
                rows = await driver.rows(conn, statement, params, begin=False)
            except DBAPIError as exc:
                if is_database_outage(exc) or exc.connection_invalidated:
                    _fail(batch, exc)
                    return
                # one of them failed: each runs alone, below
            else:
                held = {ordinal for (ordinal,) in rows} if guards is not None else None
                for ordinal, closing in enumerate(batch):
                    if not closing.done.done():  # done: its command was cancelled
                        closing.done.set_result(held is None or ordinal in held)
                return
        for closing in batch:  # one closing, or each of a batch that failed
            self.statements_run += 1
            try:
                result = await _alone(conn, closing)
            except Exception as exc:
                _fail([closing], exc)
            else:
                if not closing.done.done():
                    closing.done.set_result(result)

    def _built(self, shape: _Shape, closing: _Closing) -> _Built:
        given = (
            *(statement for statement, _ in closing.writes),
            *(() if closing.guard is None else (closing.guard[0],)),
        )
        found = self.statements.get(shape)
        if found is None or any(a is not b for a, b in zip(found.given, given, strict=True)):
            guard = None if closing.guard is None else closing.guard[0]
            statement = set_writes.statement(
                [(insert, sorted(values)) for insert, values in closing.writes],  # type: ignore[misc]
                guard,
            )
            order = set_writes.lock_order(guard) if guard is not None else []
            found = self.statements[shape] = _Built(statement, order, given)
        return found

    async def close(self) -> None:
        """Give the connections back (after the commands ended)."""
        await self.shelf.close()


async def _alone(conn: AsyncConnection, closing: _Closing) -> bool:
    """One closing in a transaction of its own on ``conn`` (committed; rolled back when its
    guard did not hold)."""
    guards = [] if closing.guard is None else [closing.guard]
    try:
        async with driver.transaction(conn):
            if not await driver.write_all(conn, closing.writes, guards, last=True):
                raise _NotHeld
    except _NotHeld:
        return False
    return True


def _fail(batch: list[_Closing], exc: BaseException) -> None:
    for closing in batch:
        if not closing.done.done():
            closing.done.set_exception(exc)
