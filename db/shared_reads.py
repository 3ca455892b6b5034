"""Reads that lock nothing, of many commands at once: the same statement in one round trip.

A command's reads before its transaction's BEGIN (``Tx.read``) lock and write nothing, so
any connection may run them. ``SharedReads.read`` runs one on a connection of its own
(``slots`` of them, kept on a ``ConnectionShelf``); a read asked while they are all busy
waits, and the next free slot runs every waiting read of the oldest waiting statement (up
to ``max_batch``) in one round trip (``db.driver.rows_each``: one statement prepared once,
executed once per command, each command's rows apart). A statement costs the web process
mostly its round trip (the send, the receive and the wake-up), so under load a command's
read costs a fraction of one; a quiet process runs each read at once, alone.

When a batch fails, each of its reads runs again alone, so one command's bad read (a value
out of range) fails that command only; a lost connection fails them all as an outage,
which each command handles as it would its own (``webfront.commands``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from common.batch_slots import BatchSlots
from db import driver
from db.connection_shelf import ConnectionShelf
from db.engine import is_database_outage

_Waiting = list[tuple[list[Any], "asyncio.Future[driver.Rows]"]]


class SharedReads:
    def __init__(self, shelf: ConnectionShelf, slots: int, max_batch: int) -> None:
        self.shelf = shelf
        self.max_batch = max_batch
        # by statement, oldest first: the statement and its waiting reads (arguments, answer)
        self.waiting: dict[int, tuple[driver.Prepared, _Waiting]] = {}
        self.runners = BatchSlots(slots, self._run, lambda: bool(self.waiting))

    @property
    def dialect(self) -> Dialect:
        return self.shelf.engine.dialect

    async def read(self, prepared: driver.Prepared, args: list[Any]) -> driver.Rows:
        future: asyncio.Future[driver.Rows] = asyncio.get_running_loop().create_future()
        found = self.waiting.get(id(prepared))
        if found is None:
            self.waiting[id(prepared)] = (prepared, [(args, future)])
        else:
            found[1].append((args, future))
        self.runners.wake()
        return await future

    async def _run(self) -> None:
        # The batch is taken when the task runs: reads asked in the same loop iteration join.
        batch: _Waiting = []
        try:
            if self.waiting:
                key = next(iter(self.waiting))
                prepared, waiting = self.waiting.pop(key)
                batch, rest = waiting[: self.max_batch], waiting[self.max_batch :]
                if rest:
                    self.waiting[key] = (prepared, rest)
                await self._answer(prepared, [(a, f) for a, f in batch if not f.done()])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # no connection to run them on: each command is told
            _fail(batch, exc)

    async def _answer(self, prepared: driver.Prepared, batch: _Waiting) -> None:
        if not batch:
            return
        async with self.shelf.connection() as conn:
            if len(batch) > 1:
                try:
                    found = await driver.rows_each(conn, prepared, [a for a, _ in batch])
                except DBAPIError as exc:
                    if is_database_outage(exc) or exc.connection_invalidated:
                        _fail(batch, exc)
                        return
                    # one of them failed: each runs alone, below
                else:
                    for (_, future), rows in zip(batch, found, strict=True):
                        if not future.done():  # done: its command was cancelled
                            future.set_result(rows)
                    return
            for args, future in batch:  # one read, or each of a batch that failed
                try:
                    rows = await driver.read(conn, prepared, args)
                except DBAPIError as exc:
                    _fail([(args, future)], exc)
                else:
                    if not future.done():
                        future.set_result(rows)

    async def close(self) -> None:
        """Give the connections back (after the commands ended)."""
        await self.shelf.close()


def _fail(batch: _Waiting, exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)
