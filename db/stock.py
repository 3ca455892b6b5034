"""Set-based SQL on the hot ``village_stock`` table: tick, settle, spend, deposit, re-rate.

Every statement applies the same rule as ``common.amounts.accrue``::

    stock(t) = max(0, min(cap, stock + rate * (t - updated_ms)))

and writes ``updated_ms = t``. Because the gain ``rate * dt`` is exact in
fixed-point units and stocks never exceed their cap, settling at any set of
intermediate times gives the same value as settling once: a tick that runs
late, twice or not at all changes nothing. Statements only move a row forward
in time (``updated_ms < t``), so an out-of-date writer cannot roll it back.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    SmallInteger,
    Update,
    and_,
    bindparam,
    func,
    literal,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from db.events import PendingHead, earliest_pending, overdue_villages
from db.models import VillageStock

RESOURCES = ("wood", "clay", "iron", "crop")
SHRINKING = frozenset({"crop"})  # resources whose rate may be negative
_T = VillageStock.__table__.c


def cap_column(resource: str) -> ColumnElement[int]:
    return _T.granary_cap if resource == "crop" else _T.warehouse_cap


def _least(dialect: str, *args: Any) -> ColumnElement[int]:
    return func.least(*args) if dialect == "postgresql" else func.min(*args)


def _greatest(dialect: str, *args: Any) -> ColumnElement[int]:
    return func.greatest(*args) if dialect == "postgresql" else func.max(*args)


def accrued(
    resource: str, now_ms: int | ColumnElement[int], dialect: str, moves_forward: bool = False
) -> ColumnElement[int]:
    """SQL for the stock of ``resource`` at ``now_ms`` (never before ``updated_ms``).

    ``moves_forward`` says the statement's WHERE already guarantees
    ``updated_ms < now_ms``, so the clamp of ``dt`` at 0 can be left out (the
    tick's hot path). Only crop can shrink (its rate is net of upkeep), so only
    crop needs the floor at 0.
    """
    stock, rate = _T[resource], _T[f"{resource}_rate"]
    now = literal(now_ms) if isinstance(now_ms, int) else now_ms
    elapsed = now - _T.updated_ms
    dt = elapsed if moves_forward else _greatest(dialect, elapsed, 0)
    capped = _least(dialect, cap_column(resource), stock + rate * dt)
    return _greatest(dialect, 0, capped) if resource in SHRINKING else capped


def settled_values(
    now_ms: int | ColumnElement[int], dialect: str, moves_forward: bool = False
) -> dict[str, ColumnElement[int]]:
    return {res: accrued(res, now_ms, dialect, moves_forward) for res in RESOURCES}


def _build_tick(
    dialect: str,
    shard: int | ColumnElement[int],
    now_ms: int | ColumnElement[int],
    held: Sequence[int] | ColumnElement[Any] | None,
) -> Update:
    stmt = update(VillageStock).where(_T.shard == shard, _T.updated_ms < now_ms)
    if held is not None:
        stmt = stmt.where(_T.village_id.not_in(held))
    return stmt.values(
        **settled_values(now_ms, dialect, moves_forward=True), updated_ms=now_ms
    ).execution_options(synchronize_session=False)


def tick_statement(shard: int, now_ms: int, dialect: str, held: Sequence[int] = ()) -> Update:
    """One shard's tick: materialize every row's stock at ``now_ms``, except ``held`` villages."""
    return _build_tick(dialect, shard, now_ms, list(held) if held else None)


@functools.cache
def _prepared_tick(dialect: str, holds: bool) -> Update:
    """``tick_statement`` with the shard, the time and the held villages as parameters
    (``_tick_parameters``), built once per dialect: building and cache-keying it anew
    costs about half a millisecond of Python, a few per cent of a shard's tick."""
    held: ColumnElement[Any] | None = bindparam("tick_held", expanding=True) if holds else None
    now = bindparam("tick_now_ms", type_=BigInteger)
    return _build_tick(dialect, bindparam("tick_shard", type_=SmallInteger), now, held)


def _tick_parameters(shard: int, now_ms: int, held: Sequence[int]) -> dict[str, Any]:
    parameters: dict[str, Any] = {"tick_shard": shard, "tick_now_ms": now_ms}
    if held:
        parameters["tick_held"] = list(held)
    return parameters


# Past this many villages with overdue events a tick is skipped: the queue is
# catching up, and a skipped tick loses nothing (the next one covers its dt).
MAX_HELD_VILLAGES = 5_000


async def horizon_head(db: AsyncSession | AsyncConnection, now_ms: int) -> PendingHead | None:
    """The pending event that bounds the settle horizon at ``now_ms`` (None: nothing does)."""
    head = await earliest_pending(db)
    return head if head is not None and head.due_ms < now_ms else None


async def settle_horizon(db: AsyncSession | AsyncConnection, now_ms: int) -> int:
    """How far the tick (or a command) may settle stocks: ``now_ms``, or the due time of the
    earliest healthy pending event (``db.events``) if that is earlier.

    A running event's follow-ups (the news of a battle reaching the attacker's home, a
    return with loot) may change production in other villages at times between its due
    time and now, and they do not exist until its transaction commits. Every follow-up is
    due no earlier than the event that makes it, so settling no village past the earliest
    pending due time keeps every such change exact, however late the queue runs.
    """
    head = await horizon_head(db, now_ms)
    return now_ms if head is None else head.due_ms


async def held_villages(conn: AsyncConnection, now_ms: int) -> list[int] | None:
    """Villages with an event due by ``now_ms`` that has not run yet (None: too many).

    The tick must not move such a village past that event's due time, or the
    production change the event makes would apply late.
    """
    held = await overdue_villages(conn, now_ms, MAX_HELD_VILLAGES + 1)
    return None if len(held) > MAX_HELD_VILLAGES else held


def bare_tick_statement(shard: int, now_ms: int) -> Update:
    """The ceiling the tick is measured against: the cheapest UPDATE of the same rows."""
    return (
        update(VillageStock)
        .where(_T.shard == shard, _T.updated_ms < now_ms)
        .values(updated_ms=now_ms)
        .execution_options(synchronize_session=False)
    )


@dataclass(frozen=True, slots=True)
class ShardTick:
    """What one shard's tick did: ``rows`` settled at ``horizon_ms`` (``now_ms`` unless the
    earliest pending event, ``head``, was due earlier)."""

    rows: int
    horizon_ms: int
    head: PendingHead | None


async def tick_shard(conn: AsyncConnection, shard: int, now_ms: int) -> ShardTick:
    """Run one shard's tick in its own transaction, up to ``settle_horizon``.

    On PostgreSQL the commit does not wait for the WAL flush: a tick lost in a
    crash is recomputed by the next one (dt per row), so it needs no durability.
    """
    dialect = conn.dialect.name
    async with conn.begin():
        if dialect == "postgresql":
            await conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            # never queue for long behind a command's row lock: the next rotation catches up
            await conn.exec_driver_sql("SET LOCAL lock_timeout = '500ms'")
        head = await horizon_head(conn, now_ms)
        horizon = now_ms if head is None else head.due_ms
        held = await held_villages(conn, horizon)  # stuck events' villages, and those due now
        if held is None:
            return ShardTick(0, horizon, head)
        result = await conn.execute(
            _prepared_tick(dialect, bool(held)), _tick_parameters(shard, horizon, held)
        )
    return ShardTick(int(result.rowcount or 0), horizon, head)


def _dialect(db: AsyncSession | AsyncConnection) -> str:
    return db.get_bind().dialect.name if isinstance(db, AsyncSession) else db.dialect.name


async def settle(
    db: AsyncSession | AsyncConnection, village_ids: Sequence[int], now_ms: int
) -> None:
    """Materialize stocks at ``now_ms`` (before a rate change, a battle, a report)."""
    if not village_ids:
        return
    dialect = _dialect(db)
    await db.execute(
        update(VillageStock)
        .where(_T.village_id.in_(list(village_ids)), _T.updated_ms < now_ms)
        .values(**settled_values(now_ms, dialect, moves_forward=True), updated_ms=now_ms)
        .execution_options(synchronize_session=False)
    )


async def spend(
    db: AsyncSession | AsyncConnection, village_id: int, cost: Mapping[str, int], now_ms: int
) -> int | None:
    """Settle and subtract ``cost`` (fixed-point) if the settled stock covers it, atomically.

    Returns the time the stock was settled at (``now_ms``, or later if the row already
    was), or None when it does not cover the cost. The condition and the write are one
    statement, so concurrent spenders can never both spend the same resources: the
    loser gets None and nothing changes.
    """
    dialect = _dialect(db)
    values = settled_values(now_ms, dialect)
    conditions = [values[res] >= cost.get(res, 0) for res in RESOURCES]
    new_values = {res: values[res] - cost.get(res, 0) for res in RESOURCES}
    result = await db.execute(
        update(VillageStock)
        .where(_T.village_id == village_id, and_(*conditions))
        .values(**new_values, updated_ms=_greatest(dialect, _T.updated_ms, now_ms))
        .returning(_T.updated_ms)
        .execution_options(synchronize_session=False)
    )
    settled = result.scalar()
    return None if settled is None else int(settled)


async def deposit(
    db: AsyncSession | AsyncConnection, village_id: int, amounts: Mapping[str, int], now_ms: int
) -> None:
    """Settle and add ``amounts`` (fixed-point), capped by storage (excess is lost)."""
    dialect = _dialect(db)
    values = settled_values(now_ms, dialect)
    new_values = {
        res: _least(dialect, cap_column(res), values[res] + amounts.get(res, 0))
        for res in RESOURCES
    }
    await db.execute(
        update(VillageStock)
        .where(_T.village_id == village_id)
        .values(**new_values, updated_ms=_greatest(dialect, _T.updated_ms, now_ms))
        .execution_options(synchronize_session=False)
    )


async def set_rates(
    db: AsyncSession | AsyncConnection,
    village_id: int,
    now_ms: int,
    rates: Mapping[str, int] | None = None,
    caps: tuple[int, int] | None = None,
) -> None:
    """Settle at ``now_ms`` with the old rates, then set new rates and/or caps.

    Production changes at the exact time of the event that changes it.
    ``caps`` is (warehouse, granary) in fixed-point units.
    """
    dialect = _dialect(db)
    values: dict[str, Any] = dict(settled_values(now_ms, dialect))
    for res, rate in (rates or {}).items():
        values[f"{res}_rate"] = rate
    if caps is not None:
        values["warehouse_cap"], values["granary_cap"] = caps
    await db.execute(
        update(VillageStock)
        .where(_T.village_id == village_id)
        .values(**values, updated_ms=_greatest(dialect, _T.updated_ms, now_ms))
        .execution_options(synchronize_session=False)
    )
