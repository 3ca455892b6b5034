"""Set-based SQL on the hot ``village_stock`` table: tick, settle, spend, deposit, re-rate.

The table's columns come from the game's declared resources (``gameapi.Resource``):
``Stocks(resources)`` builds the table and every statement on it. Every statement
applies the same rule as ``common.amounts.accrue``::

    stock(t) = min(cap, stock + rate * (t - updated_ms))      # floored at 0 if it may decline

and writes ``updated_ms = t``. Because the gain ``rate * dt`` is exact in
fixed-point units and stocks never exceed their cap, settling at any set of
intermediate times gives the same value as settling once: a tick that runs
late, twice or not at all changes nothing. Statements only move a row forward
in time (``updated_ms < t``), so an out-of-date writer cannot roll it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Index,
    MetaData,
    Select,
    SmallInteger,
    Table,
    Update,
    and_,
    bindparam,
    func,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from common.amounts import to_fixed
from db import driver
from db.events import PendingHead, earliest_due, earliest_pending, overdue_villages, written
from db.models import NAMING

if TYPE_CHECKING:
    from db.declare import Resource

STOCK_TABLE = "village_stock"


def _least(dialect: str, *args: Any) -> ColumnElement[int]:
    return func.least(*args) if dialect == "postgresql" else func.min(*args)


def _greatest(dialect: str, *args: Any) -> ColumnElement[int]:
    return func.greatest(*args) if dialect == "postgresql" else func.max(*args)


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


@dataclass(frozen=True, slots=True)
class RateChange:
    """One place's production change at a time: ``Stocks.add_rates``' arguments, for
    ``Stocks.add_rates_many``."""

    village_id: int
    at_ms: int
    deltas: Mapping[str, int]
    caps: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class ShardTick:
    """What one shard's tick did: ``rows`` settled at ``horizon_ms`` (``now_ms`` unless the
    earliest pending event, ``head``, was due earlier)."""

    rows: int
    horizon_ms: int
    head: PendingHead | None


def stock_table(metadata: MetaData, resources: Sequence[Resource]) -> Table:
    """``village_stock`` for ``resources``: village_id, shard, updated_ms, then each
    resource's stock, each one's rate, and one ``<cap>_cap`` per distinct cap."""
    caps = dict.fromkeys(r.cap for r in resources)
    return Table(
        STOCK_TABLE,
        metadata,
        Column("village_id", BigInteger, primary_key=True, autoincrement=False),
        Column("shard", SmallInteger, nullable=False),
        Column("updated_ms", BigInteger, nullable=False),
        *(Column(r.name, BigInteger, nullable=False) for r in resources),
        *(Column(f"{r.name}_rate", BigInteger, nullable=False) for r in resources),
        *(Column(f"{cap}_cap", BigInteger, nullable=False) for cap in caps),
        Index("ix_village_stock_shard", "shard"),
    )


class Stocks:
    """The ``village_stock`` table of one game's resources and every statement on it.

    Stocks and caps are fixed-point (``common.amounts.SCALE`` per unit); rates are
    whole units per hour, negative only for a resource declared ``may_decline``.
    """

    def __init__(self, resources: Sequence[Resource]) -> None:
        if not resources:
            raise ValueError("a game declares at least one resource")
        names = [r.name for r in resources]
        if len(set(names)) != len(names):
            raise ValueError(f"resource names must be distinct: {names}")
        self.resources: tuple[Resource, ...] = tuple(resources)
        self.names: tuple[str, ...] = tuple(names)
        self.caps: tuple[str, ...] = tuple(dict.fromkeys(r.cap for r in resources))
        self.cap_of: dict[str, str] = {r.name: r.cap for r in resources}
        self.declining: frozenset[str] = frozenset(r.name for r in resources if r.may_decline)
        self.metadata = MetaData(naming_convention=NAMING)
        self.table = stock_table(self.metadata, resources)
        self.c = self.table.c
        self._ticks: dict[tuple[str, bool], Update] = {}
        self._spends: dict[tuple[str, bool], Update] = {}
        self._deposits: dict[str, Update] = {}
        self._rate_setters: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Update] = {}
        self._rate_adders: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Update] = {}
        self._many_rate_adder: Update | None = None
        self._read = select(self.table).where(
            self.c.village_id == bindparam("read_village", type_=BigInteger)
        )
        self._read_names = tuple(column.key for column in self.table.c)

    def __repr__(self) -> str:
        return f"Stocks({', '.join(self.names)})"

    # ---- SQL expressions

    def cap_column(self, resource: str) -> ColumnElement[int]:
        return self.c[f"{self.cap_of[resource]}_cap"]

    def accrued(
        self,
        resource: str,
        now_ms: int | ColumnElement[int],
        dialect: str,
        moves_forward: bool = False,
    ) -> ColumnElement[int]:
        """SQL for the stock of ``resource`` at ``now_ms`` (never before ``updated_ms``).

        ``moves_forward`` says the statement's WHERE already guarantees
        ``updated_ms < now_ms``, so the clamp of ``dt`` at 0 can be left out (the
        tick's hot path). Only a resource that may decline needs the floor at 0.
        """
        c = self.c
        stock, rate = c[resource], c[f"{resource}_rate"]
        now = literal(now_ms) if isinstance(now_ms, int) else now_ms
        elapsed = now - c.updated_ms
        dt = elapsed if moves_forward else _greatest(dialect, elapsed, 0)
        capped = _least(dialect, self.cap_column(resource), stock + rate * dt)
        return _greatest(dialect, 0, capped) if resource in self.declining else capped

    def settled_values(
        self, now_ms: int | ColumnElement[int], dialect: str, moves_forward: bool = False
    ) -> dict[str, ColumnElement[int]]:
        return {res: self.accrued(res, now_ms, dialect, moves_forward) for res in self.names}

    # ---- the tick

    def _build_tick(
        self,
        dialect: str,
        shard: int | ColumnElement[int],
        now_ms: int | ColumnElement[int],
        held: Sequence[int] | ColumnElement[Any] | None,
    ) -> Update:
        c = self.c
        stmt = update(self.table).where(c.shard == shard, c.updated_ms < now_ms)
        if held is not None:
            stmt = stmt.where(c.village_id.not_in(held))
        return stmt.values(
            **self.settled_values(now_ms, dialect, moves_forward=True), updated_ms=now_ms
        ).execution_options(synchronize_session=False)

    def tick_statement(
        self, shard: int, now_ms: int, dialect: str, held: Sequence[int] = ()
    ) -> Update:
        """One shard's tick: materialize every row's stock at ``now_ms``, except ``held``."""
        return self._build_tick(dialect, shard, now_ms, list(held) if held else None)

    def _prepared_tick(self, dialect: str, holds: bool) -> Update:
        """``tick_statement`` with the shard, the time and the held villages as parameters
        (``_tick_parameters``), built once per dialect: building and cache-keying it anew
        costs about half a millisecond of Python, a few per cent of a shard's tick."""
        stmt = self._ticks.get((dialect, holds))
        if stmt is None:
            held: ColumnElement[Any] | None = (
                bindparam("tick_held", expanding=True) if holds else None
            )
            now = bindparam("tick_now_ms", type_=BigInteger)
            shard = bindparam("tick_shard", type_=SmallInteger)
            stmt = self._ticks[(dialect, holds)] = self._build_tick(dialect, shard, now, held)
        return stmt

    def bare_tick_statement(self, shard: int, now_ms: int) -> Update:
        """The ceiling the tick is measured against: the cheapest UPDATE of the same rows."""
        c = self.c
        return (
            update(self.table)
            .where(c.shard == shard, c.updated_ms < now_ms)
            .values(updated_ms=now_ms)
            .execution_options(synchronize_session=False)
        )

    async def tick_shard(self, conn: AsyncConnection, shard: int, now_ms: int) -> ShardTick:
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
                self._prepared_tick(dialect, bool(held)), _tick_parameters(shard, horizon, held)
            )
        return ShardTick(int(result.rowcount or 0), horizon, head)

    # ---- commands and handlers

    async def settle_horizon(self, db: AsyncSession | AsyncConnection, now_ms: int) -> int:
        return await settle_horizon(db, now_ms)

    def horizon(self, now_ms: ColumnElement[int], dialect: str) -> ColumnElement[int]:
        """``settle_horizon`` as SQL, to fold into a statement a command runs anyway."""
        return _least(dialect, now_ms, earliest_due(now_ms))

    def settled_rows(
        self, tag: str, village_id: ColumnElement[int], now_ms: ColumnElement[int], dialect: str
    ) -> list[Select]:
        """What a spend at the settle horizon sees, as rows to union into a command's one
        read (one consistent view with the rest of it): per resource (``tag``, resource,
        its stock settled in fixed-point units, the time it is settled at: the horizon, or
        the row's own time if that is later, as ``spend`` settles it)."""
        horizon = select(self.horizon(now_ms, dialect).label("at")).cte(f"{tag}_horizon")
        at = horizon.c.at
        values = self.settled_values(at, dialect)
        rows = self.table.join(horizon, true())
        settled_at = _greatest(dialect, self.c.updated_ms, at)
        return [
            select(written(tag), written(res), values[res], settled_at)
            .select_from(rows)
            .where(self.c.village_id == village_id)
            for res in self.names
        ]

    async def settle(
        self, db: AsyncSession | AsyncConnection, village_ids: Sequence[int], now_ms: int
    ) -> None:
        """Materialize stocks at ``now_ms`` (before a rate change, a battle, a report)."""
        if not village_ids:
            return
        c = self.c
        await db.execute(
            update(self.table)
            .where(c.village_id.in_(list(village_ids)), c.updated_ms < now_ms)
            .values(
                **self.settled_values(now_ms, driver.dialect_name(db), moves_forward=True),
                updated_ms=now_ms,
            )
            .execution_options(synchronize_session=False)
        )

    async def spend(
        self,
        db: AsyncSession | AsyncConnection,
        village_id: int,
        cost: Mapping[str, int],
        now_ms: int,
    ) -> int | None:
        """Settle and subtract ``cost`` (fixed-point) if the settled stock covers it, atomically.

        Returns the time the stock was settled at (``now_ms``, or later if the row already
        was), or None when it does not cover the cost. The condition and the write are one
        statement, so concurrent spenders can never both spend the same resources: the
        loser gets None and nothing changes.
        """
        self._known(cost)
        params = {f"spend_{res}": cost.get(res, 0) for res in self.names}
        params.update(spend_village=village_id, spend_now_ms=now_ms)
        found = await driver.rows(db, self._prepared_spend(driver.dialect_name(db)), params)
        return int(found[0][0]) if found else None

    def spend_at(
        self, village_id: int, cost: Mapping[str, int], at_ms: int, dialect: str
    ) -> tuple[Update, dict[str, Any]]:
        """``spend`` as a requirement of a command's closing statement
        (``Tx.require_at_commit``): the statement and its parameters that subtract ``cost``
        (fixed-point) from the stock settled at exactly ``at_ms``, the time the command's
        read settled it at (``settled_rows``), if the row was settled no later than that
        and still covers the cost. No row: the stock changed since the read."""
        self._known(cost)
        params: dict[str, Any] = {f"spend_{res}": cost.get(res, 0) for res in self.names}
        params.update(spend_village=village_id, spend_now_ms=at_ms)
        return self._prepared_spend(dialect, exact=True), params

    def _prepared_spend(self, dialect: str, *, exact: bool = False) -> Update:
        """``spend``'s UPDATE with the village, the time and the cost as parameters, built
        once per dialect (as ``_prepared_tick``): every command spends. ``exact``: only a
        row settled no later than the time (``spend_at``)."""
        stmt = self._spends.get((dialect, exact))
        if stmt is None:
            c = self.c
            now = bindparam("spend_now_ms", type_=BigInteger)
            values = self.settled_values(now, dialect)
            cost = {res: bindparam(f"spend_{res}", type_=BigInteger) for res in self.names}
            stmt = self._spends[(dialect, exact)] = (
                update(self.table)
                .where(
                    c.village_id == bindparam("spend_village", type_=BigInteger),
                    and_(*(values[res] >= cost[res] for res in self.names)),
                    *([c.updated_ms <= now] if exact else []),
                )
                .values(
                    **{res: values[res] - cost[res] for res in self.names},
                    updated_ms=_greatest(dialect, c.updated_ms, now),
                )
                .returning(c.updated_ms)
                .execution_options(synchronize_session=False)
            )
        return stmt

    async def deposit(
        self,
        db: AsyncSession | AsyncConnection,
        village_id: int,
        amounts: Mapping[str, int],
        now_ms: int,
    ) -> None:
        """Settle and add ``amounts`` (fixed-point), capped by storage (excess is lost)."""
        self._known(amounts)
        params = {f"deposit_{res}": amounts.get(res, 0) for res in self.names}
        params.update(deposit_village=village_id, deposit_now_ms=now_ms)
        await driver.rows(db, self._prepared_deposit(driver.dialect_name(db)), params)

    def _prepared_deposit(self, dialect: str) -> Update:
        """``deposit``'s UPDATE with its values as parameters, built once per dialect."""
        stmt = self._deposits.get(dialect)
        if stmt is None:
            now = bindparam("deposit_now_ms", type_=BigInteger)
            values = self.settled_values(now, dialect)
            added = {
                res: _least(dialect, self.cap_column(res),
                            values[res] + bindparam(f"deposit_{res}", type_=BigInteger))
                for res in self.names
            }  # fmt: skip
            stmt = self._deposits[dialect] = self._settling_update(dialect, "deposit", added, now)
        return stmt

    async def set_rates(
        self,
        db: AsyncSession | AsyncConnection,
        village_id: int,
        rates: Mapping[str, int],
        now_ms: int,
        caps: Mapping[str, int] | None = None,
    ) -> None:
        """Settle at ``now_ms`` with the old rates, then set new ``rates`` (whole units per
        hour, by resource) and/or ``caps`` (whole units, by cap name), in one statement.

        Production changes at the exact time of the event that changes it.
        """
        self._known(rates)
        self._known_caps(caps)
        for res, rate in rates.items():
            if rate < 0 and res not in self.declining:
                raise ValueError(f"{res} may not decline (rate {rate}); declare may_decline=True")
        params: dict[str, Any] = {f"new_{res}_rate": rate for res, rate in rates.items()}
        params.update({f"new_{cap}_cap": to_fixed(units) for cap, units in (caps or {}).items()})
        params.update(rates_village=village_id, rates_now_ms=now_ms)
        stmt = self._prepared_set_rates(
            driver.dialect_name(db), tuple(sorted(rates)), tuple(sorted(caps or ()))
        )
        await driver.rows(db, stmt, params)

    async def add_rates(
        self,
        db: AsyncSession | AsyncConnection,
        village_id: int,
        deltas: Mapping[str, int],
        now_ms: int,
        caps: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """Settle at ``now_ms`` with the old rates, then add ``deltas`` to the rates (whole
        units per hour, by resource) and/or set ``caps`` (whole units), in one statement
        that returns the row as it is then (``read``'s shape): a change of production needs
        no read of the row first, and none of the old rates.

        ``KeyError`` when the village has no stock row. ``ValueError`` when a resource that
        may not decline would: the row is written by then, so the caller's transaction must
        roll back (a handler's does, when it raises).
        """
        self._known(deltas)
        self._known_caps(caps)
        params: dict[str, Any] = {f"add_{res}_rate": d for res, d in deltas.items()}
        params.update({f"new_{cap}_cap": to_fixed(units) for cap, units in (caps or {}).items()})
        params.update(rates_village=village_id, rates_now_ms=now_ms)
        stmt = self._prepared_add_rates(
            driver.dialect_name(db), tuple(sorted(deltas)), tuple(sorted(caps or ()))
        )
        found = await driver.rows(db, stmt, params)
        if not found:
            raise KeyError(f"village {village_id} has no stock row")
        row = dict(zip(self._read_names, found[0], strict=True))
        self._check_declines(deltas, row)
        return row

    async def add_rates_many(
        self, db: AsyncSession | AsyncConnection, changes: Sequence[RateChange]
    ) -> list[dict[str, Any]]:
        """``add_rates`` for many places, each change at its own time, in ``changes``' order:
        the rows as each change left them (``read``'s shape), in that order. A batch of
        events that change production (buildings finished, units trained) changes it in
        one statement on PostgreSQL instead of one per event; a place changed more than
        once is changed in as many statements, in order, since one UPDATE changes a row
        once. Elsewhere (SQLite, where a statement is no round trip) one ``add_rates`` per
        change.

        Raises as ``add_rates`` does, for the first change that would."""
        if driver.dialect_name(db) != "postgresql":
            return [
                await self.add_rates(db, ch.village_id, ch.deltas, ch.at_ms, ch.caps)
                for ch in changes
            ]
        for ch in changes:
            self._known(ch.deltas)
            self._known_caps(ch.caps)
        rounds: list[list[int]] = []  # indexes into changes, each place once a round
        seen: dict[int, int] = {}  # place -> how many rounds hold it so far
        for i, ch in enumerate(changes):
            n = seen.get(ch.village_id, 0)
            seen[ch.village_id] = n + 1
            if n == len(rounds):
                rounds.append([])
            rounds[n].append(i)
        out: list[dict[str, Any]] = [{} for _ in changes]
        for indexes in rounds:
            batch = [changes[i] for i in indexes]
            params: dict[str, Any] = {
                "many_village": [ch.village_id for ch in batch],
                "many_at_ms": [ch.at_ms for ch in batch],
            }
            for res in self.names:
                params[f"many_add_{res}"] = [ch.deltas.get(res, 0) for ch in batch]
            for cap in self.caps:
                params[f"many_{cap}_cap"] = [
                    to_fixed(ch.caps[cap]) if ch.caps and cap in ch.caps else None for ch in batch
                ]
            found = await driver.rows(db, self._prepared_many_rates(), params)
            by_place = {row[0]: row for row in found}  # village_id is the first column
            for i, ch in zip(indexes, batch, strict=True):
                if ch.village_id not in by_place:
                    raise KeyError(f"village {ch.village_id} has no stock row")
                row = dict(zip(self._read_names, by_place[ch.village_id], strict=True))
                self._check_declines(ch.deltas, row)
                out[i] = row
        return out

    def _prepared_many_rates(self) -> Update:
        """``add_rates_many``'s UPDATE ... FROM the changes as arrays (every resource's
        delta; every cap, NULL to keep it), built once (PostgreSQL's)."""
        if self._many_rate_adder is None:
            c = self.c
            names = ["many_village", "many_at_ms"]
            names += [f"many_add_{res}" for res in self.names]
            names += [f"many_{cap}_cap" for cap in self.caps]
            changes = select(
                *(func.unnest(bindparam(n, type_=ARRAY(BigInteger))).label(n) for n in names)
            ).subquery("changes")
            now = changes.c.many_at_ms
            values: dict[str, Any] = dict(self.settled_values(now, "postgresql"))
            for res in self.names:
                rate = c[f"{res}_rate"]
                values[rate.key] = rate + changes.c[f"many_add_{res}"]
            for cap in self.caps:
                values[f"{cap}_cap"] = func.coalesce(changes.c[f"many_{cap}_cap"], c[f"{cap}_cap"])
            self._many_rate_adder = (
                update(self.table)
                .where(c.village_id == changes.c.many_village)
                .values(**values, updated_ms=func.greatest(c.updated_ms, now))
                .returning(*self.table.c)
                .execution_options(synchronize_session=False)
            )
        return self._many_rate_adder

    def _check_declines(self, deltas: Mapping[str, int], row: Mapping[str, Any]) -> None:
        declined = [r for r in deltas if row[f"{r}_rate"] < 0 and r not in self.declining]
        if declined:
            raise ValueError(
                f"{declined} may not decline (rates {[row[f'{r}_rate'] for r in declined]}); "
                "declare may_decline=True"
            )

    def _prepared_add_rates(
        self, dialect: str, deltas: tuple[str, ...], caps: tuple[str, ...]
    ) -> Update:
        """``add_rates``' UPDATE ... RETURNING for these resources and caps, built once per
        dialect and set of names."""
        key = (dialect, deltas, caps)
        stmt = self._rate_adders.get(key)
        if stmt is None:
            now = bindparam("rates_now_ms", type_=BigInteger)
            values: dict[str, Any] = dict(self.settled_values(now, dialect))
            for res in deltas:
                rate = self.c[f"{res}_rate"]
                values[rate.key] = rate + bindparam(f"add_{res}_rate", type_=BigInteger)
            for cap in caps:
                values[f"{cap}_cap"] = bindparam(f"new_{cap}_cap", type_=BigInteger)
            stmt = self._settling_update(dialect, "rates", values, now).returning(*self.table.c)
            self._rate_adders[key] = stmt
        return stmt

    def _prepared_set_rates(
        self, dialect: str, rates: tuple[str, ...], caps: tuple[str, ...]
    ) -> Update:
        """``set_rates``' UPDATE for these rates and caps, with every value a parameter, built
        once per dialect and set of names (events change production: buildings, troops)."""
        key = (dialect, rates, caps)
        stmt = self._rate_setters.get(key)
        if stmt is None:
            now = bindparam("rates_now_ms", type_=BigInteger)
            values: dict[str, Any] = dict(self.settled_values(now, dialect))
            for name in (*(f"{res}_rate" for res in rates), *(f"{cap}_cap" for cap in caps)):
                values[name] = bindparam(f"new_{name}", type_=BigInteger)
            stmt = self._rate_setters[key] = self._settling_update(dialect, "rates", values, now)
        return stmt

    def _settling_update(
        self, dialect: str, prefix: str, values: Mapping[str, Any], now: Any
    ) -> Update:
        """An UPDATE of the village ``{prefix}_village`` setting ``values``, settled at
        ``now`` (never moving ``updated_ms`` back)."""
        c = self.c
        return (
            update(self.table)
            .where(c.village_id == bindparam(f"{prefix}_village", type_=BigInteger))
            .values(**values, updated_ms=_greatest(dialect, c.updated_ms, now))
            .execution_options(synchronize_session=False)
        )

    async def set_caps(
        self,
        db: AsyncSession | AsyncConnection,
        village_id: int,
        caps: Mapping[str, int],
        now_ms: int,
    ) -> None:
        """Settle at ``now_ms``, then set ``caps`` (whole units, by cap name)."""
        await self.set_rates(db, village_id, {}, now_ms, caps=caps)

    # ---- rows

    async def read(self, db: AsyncSession | AsyncConnection, village_id: int) -> dict[str, Any]:
        """The village's row as stored (fixed-point stocks and caps, rates, ``updated_ms``),
        by column name; ``KeyError`` when the village has none. A plain read (no lock)."""
        found = await driver.rows(db, self._read, {"read_village": village_id}, begin=False)
        if not found:
            raise KeyError(f"village {village_id} has no stock row")
        return dict(zip(self._read_names, found[0], strict=True))

    def row(
        self,
        village_id: int,
        shard: int,
        now_ms: int,
        stock: Mapping[str, int],
        rates: Mapping[str, int],
        caps: Mapping[str, int],
    ) -> dict[str, Any]:
        """A new ``village_stock`` row from whole units (stock capped by its storage)."""
        self._known(stock)
        self._known(rates)
        missing = [cap for cap in self.caps if cap not in caps]
        if missing:
            raise ValueError(f"a new place needs every cap: {missing} missing")
        row: dict[str, Any] = {"village_id": village_id, "shard": shard, "updated_ms": now_ms}
        for res in self.names:
            row[res] = to_fixed(min(stock.get(res, 0), caps[self.cap_of[res]]))
        for res in self.names:
            row[f"{res}_rate"] = rates.get(res, 0)
        for cap in self.caps:
            row[f"{cap}_cap"] = to_fixed(caps[cap])
        return row

    def _known(self, amounts: Mapping[str, int]) -> None:
        unknown = set(amounts) - set(self.names)
        if unknown:
            raise KeyError(f"unknown resource(s) {sorted(unknown)}; declared: {list(self.names)}")

    def _known_caps(self, caps: Mapping[str, int] | None) -> None:
        unknown = set(caps or ()) - set(self.caps)
        if unknown:
            raise KeyError(f"unknown cap(s) {sorted(unknown)}; declared: {list(self.caps)}")


def _tick_parameters(shard: int, now_ms: int, held: Sequence[int]) -> dict[str, Any]:
    parameters: dict[str, Any] = {"tick_shard": shard, "tick_now_ms": now_ms}
    if held:
        parameters["tick_held"] = list(held)
    return parameters
