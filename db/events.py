"""Pending events as the database sees them, and what each one holds back.

This is the one definition of a *stuck* event. A pending event (a
``scheduled_events`` row) is one of:

- **healthy**: it has never failed. Until it has run, nothing in the world is
  settled past its due time (the tick and commands stop at the *settle
  horizon*), and no event runs more than the game's lookahead after it (the
  worker's barrier): its follow-ups may still land anywhere at any time from
  its due time on.
- **failing**: its handler raised and it waits for a retry. Only its own
  village waits for it (its later events, its spends); the rest of the world
  goes on, and a follow-up it makes into another village once it succeeds
  may apply late there. A bug must not freeze the world.
- **dead**: it failed for the last time (or its kind is unknown). It holds
  nothing back, not even its own village, until an operator requeues it
  (then it is healthy again) or drops it.

A row's ``attempts`` and ``dead_ms`` say which; the worker writes them
before it moves the event in Redis, so the database is never behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    SmallInteger,
    String,
    exists,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import dialect as postgresql_dialect
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from db.driver import rows
from db.models import ScheduledEvent

ERROR_MAX_LEN = 200  # scheduled_events.last_error is VARCHAR(200)

# the table's columns, not the mapped class's: a statement of table columns only runs on
# the Core path, without the ORM's per-call work (the command path; see overdue_row)
_EVENTS = ScheduledEvent.__table__.c
# Constants are written into the SQL, not bound: PostgreSQL plans a prepared statement once
# for all runs only when that generic plan looks no worse than plans made for the values,
# and a bound LIMIT (guessed at a tenth of the rows) made the per-command read and the
# worker's per-batch head look cheaper planned anew, so they were planned at every run.
_ONE = literal_column("1", Integer)
HOLDS_WORLD: ColumnElement[bool] = (_EVENTS.attempts == literal_column("0", SmallInteger)) & (
    _EVENTS.dead_ms.is_(None)
)
HOLDS_VILLAGE: ColumnElement[bool] = _EVENTS.dead_ms.is_(None)
# the same rules as SQL text, for statements written as text (the worker's order check)
HOLDS_VILLAGE_SQL = str(HOLDS_VILLAGE.compile(compile_kwargs={"literal_binds": True}))

Db = AsyncSession | AsyncConnection


@dataclass(frozen=True, slots=True)
class PendingHead:
    """The earliest healthy pending event: nothing is settled past its due time."""

    id: int
    kind: str
    village_id: int
    due_ms: int


async def earliest_pending(db: Db) -> PendingHead | None:
    """The earliest healthy pending event (None: none).

    Rows of events running in other transactions stay visible until those commit, so
    its due time is a lower bound of every due time a follow-up can still be given.
    """
    found = await rows(db, _EARLIEST, begin=False)
    return _head(found[0] if found else None)


def earliest_pending_sqlite(conn: sqlite3.Connection) -> PendingHead | None:
    """``earliest_pending`` on a plain ``sqlite3`` connection (the worker's order reads)."""
    return _head(conn.execute(_EARLIEST_SQLITE).fetchone())


def _head(row: Any) -> PendingHead | None:
    return None if row is None else PendingHead(int(row[0]), str(row[1]), int(row[2]), int(row[3]))


async def overdue_villages(db: Db, now_ms: int, limit: int) -> list[int]:
    """Villages with an event due by ``now_ms`` that holds them and has not run (at most
    ``limit`` of them)."""
    rows = await db.execute(
        select(ScheduledEvent.village_id)
        .where(ScheduledEvent.due_ms <= now_ms, HOLDS_VILLAGE)
        .distinct()
        .limit(limit)
    )
    return [int(r[0]) for r in rows]


async def village_has_overdue(db: Db, village_id: int, now_ms: int) -> bool:
    """Has ``village_id`` an event due by ``now_ms`` that holds it and has not run?"""
    found = await db.execute(
        select(ScheduledEvent.id)
        .where(
            ScheduledEvent.village_id == village_id,
            ScheduledEvent.due_ms <= now_ms,
            HOLDS_VILLAGE,
        )
        .limit(_ONE)
    )
    return found.first() is not None


# ``earliest_pending``: the worker asks before every claimed batch (the lookahead barrier)
_EARLIEST = (
    select(_EVENTS.id, _EVENTS.kind, _EVENTS.village_id, _EVENTS.due_ms)
    .where(HOLDS_WORLD)
    .order_by(_EVENTS.due_ms)
    .limit(_ONE)
)
_EARLIEST_SQLITE = str(
    _EARLIEST.compile(dialect=sqlite_dialect(), compile_kwargs={"literal_binds": True})
)
# the same read as text, for the worker's one-statement order check on PostgreSQL
EARLIEST_PENDING_PG_SQL = str(
    _EARLIEST.compile(dialect=postgresql_dialect(), compile_kwargs={"literal_binds": True})
)


def written(name: str) -> ColumnElement[str]:
    """A name from code (a tag, a declared resource) written into a statement as a constant
    rather than bound anew at every run."""
    if not name.replace("_", "").isalnum() and name:
        raise ValueError(f"not a plain name: {name!r}")
    return literal_column(f"'{name}'", String)


def overdue_row(tag: str, village_id: ColumnElement[int], now_ms: ColumnElement[int]) -> Select:
    """``village_has_overdue`` as a row to union into a command's one read: (``tag``, '',
    1, 0) when ``village_id`` has an event due by ``now_ms`` that holds it, else no row."""
    e = _EVENTS
    held = select(e.id).where(e.village_id == village_id, e.due_ms <= now_ms, HOLDS_VILLAGE)
    row = select(
        written(tag), written(""), literal_column("1", BigInteger), literal_column("0", BigInteger)
    )
    return row.where(exists(held))


def earliest_due(now_ms: ColumnElement[int]) -> ColumnElement[int]:
    """SQL for the due time of the earliest healthy pending event (``earliest_pending``),
    or ``now_ms`` when there is none."""
    e = _EVENTS
    earliest = select(e.due_ms).where(HOLDS_WORLD).order_by(e.due_ms)
    return func.coalesce(earliest.limit(_ONE).scalar_subquery(), now_ms)


def _error(text: str) -> str:
    return text if len(text) <= ERROR_MAX_LEN else text[: ERROR_MAX_LEN - 1] + "…"


async def mark_failed(db: Db, failures: Sequence[tuple[int, int, str]]) -> None:
    """Record failed runs: (event id, attempts so far, error) per event."""
    for event_id, attempts, error in failures:
        await db.execute(
            update(ScheduledEvent)
            .where(ScheduledEvent.id == event_id)
            .values(attempts=attempts, last_error=_error(error))
        )


async def mark_dead(db: Db, dead: Sequence[tuple[int, int, str]], now_ms: int) -> None:
    """Record events that failed for the last time: (event id, attempts, error) per event."""
    for event_id, attempts, error in dead:
        await db.execute(
            update(ScheduledEvent)
            .where(ScheduledEvent.id == event_id)
            .values(attempts=attempts, last_error=_error(error), dead_ms=now_ms)
        )


async def revive(db: Db, event_ids: Sequence[int]) -> int:
    """Make dead or failing events healthy again (an operator's requeue); returns how many."""
    if not event_ids:
        return 0
    result = await db.execute(
        update(ScheduledEvent)
        .where(ScheduledEvent.id.in_(list(event_ids)))
        .values(attempts=0, last_error=None, dead_ms=None)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
