"""Snapshot reads from the database, batched when they pile up.

``SnapshotReads.read(player_id)`` returns a player's snapshot data, read after the
call began. At most ``slots`` statements run at once (one pooled connection
each). A read asked while they are all busy waits, and the next free slot reads
every waiting player (up to ``max_batch``) with ONE statement
(``webfront.snapshot_build``). So a quiet process reads each snapshot at once,
alone, and a burst (a batch of events bumps hundreds of players, whose polls all
miss together) costs a few statements instead of one per player: the time to
serve them all is what the full-snapshot tail is made of.

With ``gather_ms`` a statement starts no sooner than that after the last one
(``common.batch_slots``): a read within that time of the last statement waits for the
next, which takes every read asked meanwhile. The statement costs the database mostly its
executor start, whatever the number of players it reads, so the busier the process the
cheaper each snapshot; a read in a quiet process still runs at once.

A waiting read is shared by every later read of the same player: it starts
after all of them were asked, so it is new enough for each (a snapshot may be
newer than its ETag, never older). A read already running is never joined.
"""

from __future__ import annotations

import asyncio
from itertools import islice
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from common.batch_slots import BatchSlots
from common.clock import SYSTEM_CLOCK, Clock
from webfront import snapshot_build
from webfront.metrics import Metrics
from webfront.snapshot_build import SnapshotBuilder, build_snapshots

Snapshot = dict[str, Any]


class SnapshotReads:
    def __init__(
        self,
        engine: AsyncEngine,
        slots: int,
        max_batch: int,
        builder: SnapshotBuilder | None = None,
        gather_ms: int = 0,
        clock: Clock = SYSTEM_CLOCK,  # paces the statements (tests: a manual clock)
        metrics: Metrics | None = None,  # counts the statements
    ) -> None:
        self.engine = engine
        self.metrics = metrics
        self.builder = builder  # the game's statement (None: the process's)
        self.max_batch = max_batch
        self.waiting: dict[int, asyncio.Future[Snapshot | None]] = {}  # oldest first
        self.runners = BatchSlots(slots, self._run, lambda: bool(self.waiting), gather_ms, clock)

    async def read(self, player_id: int) -> Snapshot | None:
        """The player's snapshot, or None if the player does not exist."""
        future = self.waiting.get(player_id)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self.waiting[player_id] = future
            self.runners.wake()
        return await asyncio.shield(future)  # a cancelled poll leaves the read to the others

    async def _run(self) -> None:
        # The batch is taken when the task runs: reads asked in the same loop iteration join.
        batch = {p: self.waiting.pop(p) for p in list(islice(self.waiting, self.max_batch))}
        try:
            if batch:
                if self.metrics is not None:
                    self.metrics.snapshot_statements += 1
                found = await self._read(list(batch))
                for player_id, future in batch.items():
                    if not future.done():
                        future.set_result(found.get(player_id))
        except asyncio.CancelledError:
            for future in batch.values():
                future.cancel()
            raise
        except Exception as exc:
            for future in batch.values():
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # retrieved: waiters (if any) re-raise it themselves

    async def _read(self, player_ids: list[int]) -> dict[int, Snapshot]:
        """One statement on a pooled connection; a connection the database dropped while it
        sat in the pool (no pre-ping here: it would cost a round trip) is replaced once."""
        if self.builder is not None:
            snapshot_build.CURRENT.set(self.builder)  # this read's task only
        for attempt in (1, 2):
            try:
                async with self.engine.connect() as conn:
                    return await build_snapshots(conn, player_ids)
            except DBAPIError as exc:
                if attempt == 2 or not exc.connection_invalidated:
                    raise
        raise AssertionError("unreachable")
