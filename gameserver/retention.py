"""Bounded storage: the retention job prunes the framework's tables in bounded batches.

Run once per world every ``RETENTION_EVERY_S`` (a leased job, ``gameserver.jobs``):

- ``processed_events``: processed ``RETENTION_PROCESSED_EVENTS_S`` ago (7 days, at least 1);
- ``idempotent_responses``: stored ``RETENTION_IDEMPOTENCY_S`` ago (1 day);
- ``player_sessions``: expired ``RETENTION_SESSIONS_S`` ago (1 day).

A game prunes its own tables the same way (``prune_rows`` from a job it registers with
``HandlerRegistry.add_job``; the reference game prunes reports after
``RETENTION_REPORTS_S``). Each DELETE takes at most ``RETENTION_BATCH`` rows in its own
short transaction, at most ``MAX_BATCHES_PER_RUN`` per table and run: a backlog is worked
off over several runs instead of holding locks for long.

**Exactly-once.** A durable event is guarded by its ``scheduled_events`` row, which the
transaction that runs it deletes: its ``processed_events`` row is history only. An
in-memory event run by a transactional handler is guarded by its processed record alone,
and only while a copy of it can still be delivered. A copy lives in Redis:

- in an in-flight batch whose worker lives and renews the lease: a batch runs at most
  ``BATCH_SIZE`` x ``HANDLER_TIMEOUT_S`` (1,000 x 30 s, about 8.3 h, if every event
  timed out); if its worker died, the lease expires after ``CLAIM_LEASE_MS`` (15 s) and
  the partition's next owner (within ``PARTITION_LEASE_TTL_MS``, 5 s) returns it to *due*;
- in *due*, overdue, where it is claimed at once.

So in a running world a redelivery comes within about 20 s of the commit, and never more
than 8.3 h after it. A world whose task servers all stopped keeps its batches in flight
until one starts again, however long that is: the job then skips ``processed_events``
while any partition holds an expired in-flight batch or an overdue entry older than the
cutoff (``redelivery_possible``). With those two rules a minimum of one day is safe.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import ColumnElement, Table, delete, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import Clock
from common.queue.eventqueue import EventQueue
from common.settings import Settings
from db.models import IdempotentResponse, PlayerSession, ProcessedEvent

log = logging.getLogger(__name__)

MAX_BATCHES_PER_RUN = 20  # per table: a run deletes at most this many batches of rows


async def prune_rows(
    sessions: async_sessionmaker[AsyncSession],
    table: Table,
    older: ColumnElement[bool],
    *,
    batch: int,
    max_batches: int = MAX_BATCHES_PER_RUN,
    order_by: Any = None,
) -> int:
    """Delete the rows of ``table`` matching ``older``, ``batch`` at a time (oldest first by
    ``order_by``, an indexed column), in separate transactions; returns the rows deleted."""
    pk = list(table.primary_key.columns)
    key = pk[0] if len(pk) == 1 else tuple_(*pk)
    total = 0
    for _ in range(max_batches):
        chosen = select(*pk).where(older).limit(batch)
        if order_by is not None:
            chosen = chosen.order_by(order_by)
        async with sessions() as session, session.begin():
            result = await session.execute(delete(table).where(key.in_(chosen)))
        done = int(result.rowcount or 0)  # type: ignore[attr-defined]
        total += done
        if done < batch:
            break
    return total


async def redelivery_possible(queue: EventQueue, cutoff_ms: int) -> bool:
    """Could an event processed before ``cutoff_ms`` still be delivered again? Yes while a
    partition holds an expired in-flight batch (its worker died; no one has returned it
    yet) or an entry due before the cutoff (it may be such a batch, returned)."""
    now = queue.clock.now_ms()
    async with queue.redis.pipeline(transaction=False) as pipe:
        for p in range(queue.partitions):
            keys = queue.keys(p)
            pipe.zrange(keys.inflight, 0, 0, withscores=True)
            pipe.zrange(keys.due, 0, 0, withscores=True)
        replies = await pipe.execute()
    for i, reply in enumerate(replies):
        if reply:
            score = float(reply[0][1])
            if score < (now if i % 2 == 0 else cutoff_ms):
                return True
    return False


@dataclass(slots=True)
class Pruned:
    rows: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # tables left alone this run, and why


class Retention:
    """The framework's retention job (``run``), added by the task server."""

    def __init__(
        self,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        queue: EventQueue,
        clock: Clock,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.queue = queue
        self.clock = clock
        self.pruned = Counter(
            "gameserver_pruned_rows",
            "Rows deleted by the retention job",
            ["table"],
            registry=registry or CollectorRegistry(),
        )

    async def run(self) -> Pruned:
        s, now = self.settings, self.clock.now_ms()
        out = Pruned()
        processed_cutoff = now - s.retention_processed_events_s * 1000
        if await redelivery_possible(self.queue, processed_cutoff):
            out.skipped.append("processed_events: a batch may still be delivered again")
            log.info("retention: processed_events kept this time: %s", out.skipped[-1])
        else:
            out.rows["processed_events"] = await self._prune(
                cast(Table, ProcessedEvent.__table__),
                ProcessedEvent.processed_ms < processed_cutoff,
                ProcessedEvent.processed_ms,
            )
        out.rows["idempotent_responses"] = await self._prune(
            IdempotentResponse.__table__,  # type: ignore[arg-type]
            IdempotentResponse.created_ms < now - s.retention_idempotency_s * 1000,
            IdempotentResponse.created_ms,
        )
        out.rows["player_sessions"] = await self._prune(
            PlayerSession.__table__,  # type: ignore[arg-type]
            PlayerSession.expires_ms < now - s.retention_sessions_s * 1000,
            PlayerSession.expires_ms,
        )
        for table, rows in out.rows.items():
            if rows:
                self.pruned.labels(table).inc(rows)
        if any(out.rows.values()):
            log.info("retention: pruned %s", ", ".join(f"{n} {t}" for t, n in out.rows.items()))
        return out

    async def _prune(self, table: Table, older: ColumnElement[bool], order_by: Any) -> int:
        return await prune_rows(
            self.sessions, table, older, batch=self.settings.retention_batch, order_by=order_by
        )
