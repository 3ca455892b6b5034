"""The reconciler: pending DB events that Redis does not know are indexed again.

Redis is only the due-time index of durable events; the ``scheduled_events``
rows are the truth. A pass reads the pending rows of some partitions (keyset
pages by id), asks Redis which ids it lacks, and indexes those. Passes run
when a partition is acquired, periodically, and at once when a partition's
marker key vanished (Redis restarted empty, FLUSHALL, failover without a
replica). The marker is set *before* a pass reads, so a loss during the pass
is seen by the next check.

Indexing an event that a worker is processing right now is harmless: the
worker's ``DELETE ... RETURNING`` runs it once and the copy is acked without
effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.queue.constants import MARKER_CHECK_MS, RECONCILE_CHUNK, RECONCILE_EVERY_MS
from common.queue.durable import row_to_event
from common.queue.eventqueue import EventQueue
from db.models import ScheduledEvent
from gameserver.metrics import QueueMetrics

OVERDUE_SWEEP_MS = 5_000  # how often overdue DB events are checked against Redis
OVERDUE_GRACE_MS = 2_000  # an event this late and unknown to Redis was lost

log = logging.getLogger(__name__)


class Reconciler:
    def __init__(
        self,
        queue: EventQueue,
        sessions: async_sessionmaker[AsyncSession],
        partitions: Callable[[], Iterable[int]],
        *,
        every_ms: int = RECONCILE_EVERY_MS,
        marker_check_ms: int = MARKER_CHECK_MS,
        chunk: int = RECONCILE_CHUNK,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.queue = queue
        self.sessions = sessions
        self.partitions = partitions  # the partitions this process is responsible for now
        self.every_ms = every_ms
        self.marker_check_ms = marker_check_ms
        self.chunk = chunk
        self.metrics = metrics
        self._requested: set[int] = set()
        self._kick = asyncio.Event()
        self._marker_token = f"{time.time_ns()}"

    def request(self, partitions: Iterable[int]) -> None:
        """Reconcile these partitions soon (for example right after acquiring them)."""
        self._requested.update(partitions)
        self._kick.set()

    async def lost_markers(self, partitions: Collection[int]) -> list[int]:
        """The partitions whose marker key is gone: Redis lost their data."""
        parts = sorted(partitions)
        if not parts:
            return []
        async with self.queue.redis.pipeline(transaction=False) as pipe:
            for p in parts:
                pipe.exists(self.queue.keys(p).marker)
            found = await pipe.execute()
        return [p for p, hit in zip(parts, found, strict=True) if not hit]

    async def _set_markers(self, partitions: Collection[int]) -> None:
        async with self.queue.redis.pipeline(transaction=False) as pipe:
            for p in partitions:
                pipe.set(self.queue.keys(p).marker, self._marker_token)
            await pipe.execute()

    async def reconcile(self, partitions: Collection[int], due_before: int | None = None) -> int:
        """One pass over the pending events of ``partitions``; return how many were indexed.

        ``due_before`` limits the pass to events due by then (the overdue sweep).
        """
        parts = set(partitions)
        if not parts:
            return 0
        if due_before is None:
            await self._set_markers(parts)
        total = self.queue.partitions
        by_partition = (ScheduledEvent.village_id % total).in_(sorted(parts))
        indexed = 0
        after = -1
        while True:
            query = (
                select(ScheduledEvent.id, ScheduledEvent.village_id)
                .where(ScheduledEvent.id > after, ScheduledEvent.dead_ms.is_(None))
                .order_by(ScheduledEvent.id)
                .limit(self.chunk)
            )
            if len(parts) < total:
                query = query.where(by_partition)
            if due_before is not None:
                query = query.where(ScheduledEvent.due_ms <= due_before)
            async with self.sessions() as session:
                rows = [(int(i), int(v)) for i, v in await session.execute(query)]
            if not rows:
                break
            after = rows[-1][0]
            ids_of: dict[int, list[int]] = {}
            for event_id, village_id in rows:
                ids_of.setdefault(village_id % total, []).append(event_id)
            lacking: list[int] = []
            for p, ids in ids_of.items():
                lacking.extend(await self.queue.missing(p, ids))
            if lacking:
                # read them again: the ones that ran meanwhile are gone from the table
                async with self.sessions() as session:
                    found = (
                        await session.execute(
                            select(ScheduledEvent).where(
                                ScheduledEvent.id.in_(lacking), ScheduledEvent.dead_ms.is_(None)
                            )
                        )
                    ).scalars()
                    events = [row_to_event(row) for row in found]
                indexed += await self.queue.index(events)
            if len(rows) < self.chunk:
                break
        if indexed:
            log.warning("reconciler: indexed %d pending DB events Redis lacked", indexed)
            if self.metrics is not None:
                self.metrics.reconciled.inc(indexed)
        return indexed

    async def run(self) -> None:
        """Reconcile requested partitions, vanished markers, and everything every ``every_ms``."""
        next_full = time.monotonic() + self.every_ms / 1000
        next_sweep = time.monotonic() + OVERDUE_SWEEP_MS / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.marker_check_ms / 1000):
                    await self._kick.wait()
            self._kick.clear()
            todo: set[int] = set()
            try:
                held = set(self.partitions())
                todo = self._requested & held
                self._requested -= todo
                if time.monotonic() >= next_full:
                    next_full = time.monotonic() + self.every_ms / 1000
                    todo |= held
                lost = await self.lost_markers(held - todo)
                if lost:
                    log.warning("Redis lost the data of partitions %s: reconciling now", lost)
                    if self.metrics is not None:
                        self.metrics.redis_data_lost.inc(len(lost))
                todo.update(lost)
                if todo:
                    await self.reconcile(todo)
                if time.monotonic() >= next_sweep:
                    # A command whose commit raced a Redis restart could not index its
                    # event; whatever is overdue and unknown to Redis is indexed now.
                    next_sweep = time.monotonic() + OVERDUE_SWEEP_MS / 1000
                    cutoff = self.queue.clock.now_ms() - OVERDUE_GRACE_MS
                    await self.reconcile(held - todo, due_before=cutoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconciler pass failed; retrying")
                self._requested |= todo
                self._kick.set()
                await asyncio.sleep(1)
