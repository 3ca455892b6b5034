"""An operator's dead letters: list them, run them again, or drop them with their compensation.

The CLI (``wgctl queue dead|requeue|drop``) and an operator console call these
functions; each takes the world's queue and DB sessions.

A dead durable event is a ``scheduled_events`` row with ``dead_ms`` set (its
reason in ``last_error``) plus, normally, an entry in its partition's Redis
dead set. The row is the truth: Redis may have lost the entry (a restart,
``FLUSHALL``), and an in-memory event has no row. While dead it holds nothing
back (``db.events``).

- ``requeue`` makes the row healthy again first, then moves the Redis entry
  back to *due* (or indexes the row when Redis lost it). It runs at its own
  due time in the order (due, priority, id): its village's later events wait
  for it again (``durable.earlier_in_villages``).
- ``drop`` deletes the row and, in the same transaction, runs the kind's
  compensation (``HandlerRegistry.register(..., compensate=fn)``): what its
  command took is given back. Its follow-ups are indexed and the touched
  players' snapshots bumped after the commit; then the Redis entry goes.
  Only a dead row is dropped: a requeued one may be running.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.queue import codec, durable
from common.queue.eventqueue import EventQueue
from common.queue.events import Event
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.queue.work import Committed
from db import events as pending
from db.models import ScheduledEvent
from db.stock import Stocks


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead event, from its DB row, its Redis entry or both."""

    id: int
    kind: str | None  # None: an unreadable Redis entry without a row
    village_id: int | None
    due_ms: int | None
    partition: int | None  # None: Redis has no entry (lost, or never indexed)
    durable: bool
    attempts: int
    error: str
    died_ms: int | None
    payload: dict[str, Any] | None  # for an operator's eyes only: never logged

    @property
    def in_redis(self) -> bool:
        return self.partition is not None


@dataclass(frozen=True, slots=True)
class Outcome:
    done: list[int]  # ids requeued or dropped
    not_dead: list[int]  # ids that are not dead events (any more)


def _from_row(row: ScheduledEvent, partition: int | None) -> DeadLetter:
    try:
        payload: dict[str, Any] | None = codec.unpack(row.payload)
    except Exception:  # an unreadable payload is a reason to be dead, not to fail a listing
        payload = None
    return DeadLetter(
        row.id, row.kind, row.village_id, row.due_ms, partition, True, row.attempts,
        row.last_error or "", row.dead_ms, payload,
    )  # fmt: skip


async def list_dead(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], limit: int = 100
) -> list[DeadLetter]:
    """Dead events, oldest death first: at most ``limit`` rows and ``limit`` Redis entries
    per partition, merged by id."""
    redis_dead = {d.id: d for d in await queue.dead(limit=limit)}
    async with sessions() as session:
        rows = (
            await session.execute(
                select(ScheduledEvent)
                .where(ScheduledEvent.dead_ms.is_not(None))
                .order_by(ScheduledEvent.dead_ms, ScheduledEvent.id)
                .limit(limit)
            )
        ).scalars()
        out = {row.id: _from_row(row, None) for row in rows}
    for event_id, d in redis_dead.items():
        letter = out.get(event_id)
        if letter is not None:
            out[event_id] = DeadLetter(
                letter.id, letter.kind, letter.village_id, letter.due_ms, d.partition,
                True, letter.attempts, letter.error, letter.died_ms, letter.payload,
            )  # fmt: skip
            continue
        e = d.event
        out[event_id] = DeadLetter(
            d.id, e.kind if e else None, e.village_id if e else None, e.due_ms if e else None,
            d.partition, bool(e and e.durable), d.attempts, d.error, d.died_ms,
            dict(e.payload) if e else None,
        )  # fmt: skip
    return sorted(out.values(), key=lambda d: (d.died_ms or 0, d.id))


async def requeue(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], event_ids: Iterable[int]
) -> Outcome:
    """Run dead events again, in their place in the order, with their attempts reset."""
    ids = sorted(set(event_ids))
    found = await _in_redis(queue, ids)
    async with sessions() as session, session.begin():
        rows = list(
            (await session.execute(select(ScheduledEvent).where(_dead(ids, found)))).scalars()
        )
        # the row first: a worker runs a dead row's event to no effect
        await pending.revive(session, [row.id for row in rows])
    revived = {row.id: durable.row_to_event(row) for row in rows}
    done: list[int] = []
    not_dead: list[int] = []
    lost: list[Event] = []
    for event_id in ids:
        partition = found.get(event_id)
        if partition is not None and await queue.requeue_dead(partition, event_id):
            done.append(event_id)
        elif event_id in revived:
            lost.append(revived[event_id])  # Redis lost it: index the row
            done.append(event_id)
        else:
            not_dead.append(event_id)
    if lost:
        await queue.index(lost)
    return Outcome(done, not_dead)


async def drop(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    registry: HandlerRegistry,
    event_ids: Iterable[int],
    *,
    stocks: Stocks | None = None,
    world_speed: float = 1.0,
) -> Outcome:
    """Delete dead events for good, running each kind's compensation in the transaction that
    deletes their rows (with the game's ``stocks`` on its ``Tx``)."""
    ids = sorted(set(event_ids))
    found = await _in_redis(queue, ids)
    now = queue.clock.now_ms()
    async with sessions() as session, session.begin():
        rows = list(
            (
                await session.execute(
                    delete(ScheduledEvent).where(_dead(ids, found)).returning(ScheduledEvent)
                )
            ).scalars()
        )
        tx = Tx(session, now, world_speed, queue.ids, kinds=registry, stocks=stocks)
        await _compensate(tx, registry, rows)
        await tx.write_kept()
        work = Committed()
        work.add(tx, await durable.add_durable_events(session, tx.events, clock=queue.clock))
    dropped = {row.id for row in rows}
    await work.finish(queue, queue.clock.now_ms(), "dropping dead events")
    for event_id, partition in found.items():
        if await queue.drop_dead(partition, event_id):
            dropped.add(event_id)
    return Outcome(sorted(dropped), [i for i in ids if i not in dropped])


async def _in_redis(queue: EventQueue, ids: Sequence[int]) -> dict[int, int]:
    """The partition of each of ``ids`` that Redis holds as a dead event."""
    found = {}
    for event_id in ids:
        partition = await queue.find_dead(event_id)
        if partition is not None:
            found[event_id] = partition
    return found


def _dead(ids: Sequence[int], in_redis: dict[int, int]) -> ColumnElement[bool]:
    """The rows of ``ids`` that are dead: marked so, or dead in Redis (a world that ran an
    older version, or an entry moved there by hand)."""
    marked = ScheduledEvent.id.in_(ids) & ScheduledEvent.dead_ms.is_not(None)
    return or_(marked, ScheduledEvent.id.in_(list(in_redis))) if in_redis else marked


async def _compensate(tx: Tx, registry: HandlerRegistry, rows: Sequence[ScheduledEvent]) -> None:
    """Run the compensations of dropped rows in ``tx``, kind by kind in run order."""
    by_kind: dict[str, list[Event]] = {}
    for row in sorted(rows, key=lambda r: (r.due_ms, r.priority, r.id)):
        reg = registry.get(row.kind)
        if reg is not None and reg.compensate is not None:
            by_kind.setdefault(row.kind, []).append(durable.row_to_event(row))
    for kind, events in by_kind.items():
        compensate = registry.get(kind).compensate  # type: ignore[union-attr]
        await compensate(tx, events)  # type: ignore[misc]
