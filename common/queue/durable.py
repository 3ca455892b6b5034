"""Durable events: a ``scheduled_events`` row is the truth, Redis only indexes it.

A game command writes its order/march row and its event row in ONE
transaction, commits, then indexes the event::

    async with sessions() as session, session.begin():
        session.add(March(...))
        events = await add_durable_events(session, [NewEvent("march.arrive", target, arrive_ms)])
    await queue.index(events)

If the process dies between the commit and ``index``, the reconciler indexes
the row later. The worker's transaction deletes the row (``DELETE ...
RETURNING``): only the transaction that deleted it runs the handler, so a
redelivered event changes nothing.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from common.clock import SYSTEM_CLOCK, Clock
from common.ids import IdGenerator
from common.queue import codec
from common.queue.constants import DUE_MS_MAX, MAX_AHEAD_MS
from common.queue.errors import ScheduleError
from common.queue.eventqueue import check_new_event
from common.queue.events import Event, NewEvent
from db.driver import dialect_name, rows
from db.events import (
    EARLIEST_PENDING_PG_SQL,
    HOLDS_VILLAGE_SQL,
    Db,
    PendingHead,
    earliest_pending,
)
from db.models import ProcessedEvent, ScheduledEvent

_DEFAULT_IDS: IdGenerator | None = None
# a Core insert, built once: every command and many handlers write event rows
INSERT_EVENT = insert(ScheduledEvent.__table__)  # type: ignore[arg-type]


def _default_ids() -> IdGenerator:
    global _DEFAULT_IDS
    if _DEFAULT_IDS is None:
        _DEFAULT_IDS = IdGenerator()
    return _DEFAULT_IDS


def durable_rows(
    events: Sequence[NewEvent],
    *,
    clock: Clock = SYSTEM_CLOCK,
    ids: IdGenerator | None = None,
    max_ahead_ms: int = MAX_AHEAD_MS,
) -> tuple[list[Event], list[dict[str, Any]]]:
    """The events and their ``scheduled_events`` rows (for ``INSERT_EVENT``), checked.

    Raises ``ScheduleError`` for the same bad input ``EventQueue.schedule`` rejects.
    """
    if not events:
        return [], []
    now = clock.now_ms()
    latest = min(now + max_ahead_ms, DUE_MS_MAX)
    fresh = (ids or _default_ids()).next_ids(len(events))
    out: list[Event] = []
    rows = []
    for new, new_id in zip(events, fresh, strict=True):
        check_new_event(new, now, latest)
        event = Event(
            new_id if new.id is None else new.id,
            new.kind,
            new.village_id,
            new.due_ms,
            new.priority,
            new.payload,
            0,
            True,
        )
        try:
            payload = codec.pack(event.payload)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ScheduleError(f"event {event.kind!r}: payload cannot be encoded: {exc}") from None
        rows.append(
            {
                "id": event.id,
                "kind": event.kind,
                "village_id": event.village_id,
                "due_ms": event.due_ms,
                "priority": event.priority,
                "payload": payload,
                "created_ms": now,
                # the columns' defaults, given: a default left to SQLAlchemy to fill in
                # would keep the row off the driver's fast path
                "attempts": 0,
                "last_error": None,
                "dead_ms": None,
            }
        )
        out.append(event)
    return out, rows


async def add_durable_events(
    session: AsyncSession | AsyncConnection,
    events: Sequence[NewEvent],
    *,
    clock: Clock = SYSTEM_CLOCK,
    ids: IdGenerator | None = None,
    max_ahead_ms: int = MAX_AHEAD_MS,
) -> list[Event]:
    """Write ``scheduled_events`` rows in the caller's transaction; return the events.

    After the transaction commits, pass the result to ``EventQueue.index``.
    Raises ``ScheduleError`` for the same bad input ``EventQueue.schedule`` rejects.
    """
    out, rows = durable_rows(events, clock=clock, ids=ids, max_ahead_ms=max_ahead_ms)
    if rows:
        await session.execute(INSERT_EVENT, rows)
    return out


async def cancel_durable(session: AsyncSession, event_id: int) -> bool:
    """Delete a pending event's row in the caller's transaction.

    True: the event will never take effect (then call ``EventQueue.cancel`` after
    the commit to tidy Redis). False: it already ran (or is running and will
    commit first; the row lock makes this call wait for that on PostgreSQL).
    """
    result = await session.execute(delete(ScheduledEvent).where(ScheduledEvent.id == event_id))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def reschedule_durable(session: AsyncSession, event_id: int, due_ms: int) -> bool:
    """Move a pending event's row to ``due_ms``; then call ``EventQueue.reschedule`` after
    the commit. A worker that already claimed it sees the later DB due time and defers it."""
    result = await session.execute(
        update(ScheduledEvent).where(ScheduledEvent.id == event_id).values(due_ms=due_ms)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


# The village-order check runs for every claimed batch, so its statements are constant
# text (compiled once, one parameter per list) rather than IN lists that SQLAlchemy renders
# anew for every batch. SQLite reads a list from JSON, PostgreSQL from an array. The SQLite
# text is also what ``SqliteReader`` runs on the worker's own thread.
_OF_THE_BATCH = {  # the batch's villages, not its own events
    "sqlite": "village_id IN (SELECT value FROM json_each(:villages)) "
    "AND id NOT IN (SELECT value FROM json_each(:ids))",
    "postgresql": "village_id = ANY(CAST(:villages AS BIGINT[])) "
    "AND id <> ALL(CAST(:ids AS BIGINT[]))",
}
_EARLIER_WHERE = {
    dialect: f"{villages} AND due_ms <= :last AND {HOLDS_VILLAGE_SQL}"
    for dialect, villages in _OF_THE_BATCH.items()
}
_EARLIER_SQL = {
    dialect: "SELECT id, kind, village_id, due_ms, priority, payload FROM scheduled_events "
    f"WHERE {where} ORDER BY due_ms, priority, id"
    for dialect, where in _EARLIER_WHERE.items()
}
_EARLIER = {dialect: text(sql) for dialect, sql in _EARLIER_SQL.items()}
# Any pending row that holds its village, due by ``:last``? None: no village can have an
# earlier event, whatever the batch holds (one probe of the due index).
_ANY_HOLDING_SQL = (
    f"SELECT 1 FROM scheduled_events WHERE due_ms <= :last AND {HOLDS_VILLAGE_SQL} LIMIT 1"
)
_ANY_HOLDING = text(_ANY_HOLDING_SQL)
# PostgreSQL: the world's head (``db.events.earliest_pending``) and the villages' earlier
# events in ONE round trip and one snapshot; the head comes first, marked ``is_head``
_HEAD_AND_EARLIER = text(
    "SELECT true AS is_head, id, kind, village_id, due_ms, 0 AS priority, "
    f"NULL::bytea AS payload FROM ({EARLIEST_PENDING_PG_SQL}) AS head "
    "UNION ALL SELECT false, id, kind, village_id, due_ms, priority, payload FROM "
    f"scheduled_events WHERE {_EARLIER_WHERE['postgresql']} "
    "ORDER BY is_head DESC, due_ms, priority, id"
)
_is_durable = operator.attrgetter("durable")


def _order_params(events: Sequence[Event], last: int, dialect: str) -> dict[str, Any]:
    """The parameters of ``_EARLIER`` for ``events``."""
    ids = [e.id for e in events if e.durable]
    villages = sorted({e.village_id for e in events})
    if dialect == "postgresql":
        return {"last": last, "villages": villages, "ids": ids}
    return {"last": last, "villages": _json_ints(villages), "ids": _json_ints(ids)}


async def earlier_in_villages(db: Db, events: Sequence[Event]) -> dict[int, Event]:
    """Per village of ``events``: the first pending event (in run order) that holds the
    village (``db.events``), is not one of ``events`` and is due no later than the last
    of them.

    It runs before the village's events in the batch that come after it. Redis may lack
    it for a moment (its creator committed and has not indexed it yet, a Redis restart,
    an index that failed) or hold it for a retry, so the batch alone cannot tell.
    """
    if not events:
        return {}
    last = max(e.due_ms for e in events)
    # a batch without rows of its own: one probe answers for every village when no row at
    # all is pending that early (the usual case)
    if not any(map(_is_durable, events)) and not await rows(
        db, _ANY_HOLDING, {"last": last}, begin=False
    ):
        return {}
    dialect = dialect_name(db)
    params = _order_params(events, last, dialect)
    return first_per_village(await rows(db, _EARLIER[dialect], params, begin=False))


async def order_reads(
    db: Db, events: Sequence[Event], lookahead: bool
) -> tuple[PendingHead | None, dict[int, Event]]:
    """What the worker's order check reads before it runs ``events``: the world's earliest
    healthy pending event when the game has a ``lookahead`` (else None), and
    ``earlier_in_villages``. A batch of durable events on PostgreSQL asks both at once."""
    if lookahead and any(map(_is_durable, events)) and dialect_name(db) == "postgresql":
        last = max(e.due_ms for e in events)
        found = await rows(
            db, _HEAD_AND_EARLIER, _order_params(events, last, "postgresql"), begin=False
        )
        head = None
        if found and found[0][0]:
            event_id, kind, village_id, due_ms = found[0][1:5]
            head = PendingHead(int(event_id), str(kind), int(village_id), int(due_ms))
            found = found[1:]
        return head, first_per_village(row[1:] for row in found)
    head = await earliest_pending(db) if lookahead else None
    return head, await earlier_in_villages(db, events)


def earlier_in_villages_sqlite(
    conn: sqlite3.Connection, events: Sequence[Event]
) -> dict[int, Event]:
    """``earlier_in_villages`` on a plain ``sqlite3`` connection (``SqliteReader``)."""
    if not events:
        return {}
    last = max(e.due_ms for e in events)
    if (
        not any(map(_is_durable, events))
        and conn.execute(_ANY_HOLDING_SQL, {"last": last}).fetchone() is None
    ):
        return {}
    params = _order_params(events, last, "sqlite")
    return first_per_village(conn.execute(_EARLIER_SQL["sqlite"], params).fetchall())


def first_per_village(rows: Iterable[Any]) -> dict[int, Event]:
    """Rows of ``_EARLIER`` (in run order) -> the first event of each village."""
    first: dict[int, Event] = {}
    for event_id, kind, village_id, due_ms, priority, payload in rows:
        if village_id not in first:
            first[village_id] = Event(
                event_id, kind, village_id, due_ms, priority, codec.unpack(payload), 0, True
            )
    return first


def _json_ints(values: Sequence[int]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


def row_to_event(row: ScheduledEvent) -> Event:
    return Event(
        row.id,
        row.kind,
        row.village_id,
        row.due_ms,
        row.priority,
        codec.unpack(row.payload),
        0,
        True,
    )


# PostgreSQL: the batch's due rows are deleted and recorded as processed in one statement,
# compiled once (``db.driver``): one round trip instead of two through the ORM.
_TAKE_AND_RECORD = text(
    "WITH taken AS (DELETE FROM scheduled_events WHERE id = ANY(CAST(:ids AS BIGINT[])) "
    "AND due_ms <= :now AND dead_ms IS NULL RETURNING id, kind, village_id) "
    "INSERT INTO processed_events (event_id, kind, village_id, processed_ms) "
    "SELECT id, kind, village_id, CAST(:now AS BIGINT) FROM taken RETURNING event_id"
)


async def take_events(
    session: AsyncSession, events: Sequence[Event], now_ms: int
) -> tuple[list[Event], list[tuple[Event, int]]]:
    """Claim ``events`` in the DB for this transaction and record the ones to run as
    processed: (to run, to defer to a later due).

    Durable events run only if this transaction deleted their row. A row with
    a due time still ahead was rescheduled after Redis handed the event out:
    it is deferred to that time. A missing row means the event already ran
    or was cancelled; a dead row (``db.events``) waits for an operator, so its
    stray copy does nothing either. In-memory events run unless
    ``processed_events`` has them.
    """
    durable_ids = [e.id for e in events if e.durable]
    deleted: set[int] = set()
    deferred: list[tuple[Event, int]] = []
    if durable_ids:
        deleted = await _take_durable(session, [e for e in events if e.durable], now_ms)
        if len(deleted) != len(durable_ids):
            rest = [i for i in durable_ids if i not in deleted]
            rows = await session.execute(
                select(ScheduledEvent.id, ScheduledEvent.due_ms).where(
                    ScheduledEvent.id.in_(rest),
                    ScheduledEvent.due_ms > now_ms,
                    ScheduledEvent.dead_ms.is_(None),
                )
            )
            later = {event_id: due for event_id, due in rows}
            deferred = [(e, later[e.id]) for e in events if e.id in later]
    volatile = [e.id for e in events if not e.durable]
    done: set[int] = set()
    if volatile:
        done = set(
            (
                await session.execute(
                    select(ProcessedEvent.event_id).where(ProcessedEvent.event_id.in_(volatile))
                )
            ).scalars()
        )
        await record_processed(
            session, [e for e in events if not e.durable and e.id not in done], now_ms
        )
    run = [e for e in events if (e.id in deleted if e.durable else e.id not in done)]
    return run, deferred


async def _take_durable(session: AsyncSession, events: list[Event], now_ms: int) -> set[int]:
    """Delete the due rows of ``events`` and record those events as processed; their ids."""
    ids = [e.id for e in events]
    if session.get_bind().dialect.name == "postgresql":
        taken = await rows(session, _TAKE_AND_RECORD, {"ids": ids, "now": now_ms})
        return {event_id for (event_id,) in taken}
    result = await session.execute(
        delete(ScheduledEvent)
        .where(
            ScheduledEvent.id.in_(ids),
            ScheduledEvent.due_ms <= now_ms,
            ScheduledEvent.dead_ms.is_(None),
        )
        .returning(ScheduledEvent.id),
        execution_options={"synchronize_session": False},
    )
    deleted = set(result.scalars())
    await record_processed(session, [e for e in events if e.id in deleted], now_ms)
    return deleted


async def record_processed(session: AsyncSession, events: Sequence[Event], now_ms: int) -> None:
    """Insert the ``processed_events`` rows of ``events`` (same transaction as their effects)."""
    if events:
        await session.execute(
            insert(ProcessedEvent),
            [
                {
                    "event_id": e.id,
                    "kind": e.kind,
                    "village_id": e.village_id,
                    "processed_ms": now_ms,
                }
                for e in events
            ],
        )
