"""The reference game's reads and writes of the world tables, inside a caller's transaction.

Commands (web tier) and event handlers (task server) share these. Every write
that changes production first settles the stock at the change's own time
(``Stocks.add_rates``), so resources stay exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlalchemy import (
    BigInteger,
    Insert,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from common.ids import IdGenerator
from db import driver
from db.models import Village
from db.stock import RateChange
from refgame.economy import starvation_time_ms
from refgame.models import Report, Troop
from refgame.resources import RESOURCES, STOCKS

STARVATION = "starvation"  # event kind: the crop of a village may have run out


class Scheduler(Protocol):
    """Where game code puts the timed events it creates (committed with its transaction)."""

    def schedule(
        self,
        kind: str,
        village_id: int,
        due_ms: int,
        payload: dict[str, Any],
        *,
        event_id: int | None = None,
    ) -> int: ...


class GameTx(Scheduler, Protocol):
    """One transaction of game code: a command from the web tier or a batch of events.

    ``schedule`` writes a durable event in this transaction (indexed in Redis
    after the commit); ``touch_players`` names players whose snapshot changed.
    """

    ids: IdGenerator

    @property
    def session(self) -> AsyncSession: ...

    @property
    def world_speed(self) -> float: ...

    def touch_players(self, player_ids: Iterable[int | None]) -> None: ...


@dataclass(frozen=True)
class VillageInfo:
    id: int
    player_id: int | None
    name: str
    x: int
    y: int


# the columns of a ``VillageInfo``, in its fields' order
VILLAGE_INFO_COLUMNS = (Village.id, Village.player_id, Village.name, Village.x, Village.y)
# Every event handler and command reads a few rows of one village: these statements are built
# once (``db.driver`` runs them on the driver, compiled once, on PostgreSQL).
_VILLAGE = bindparam("village", type_=BigInteger)
_VILLAGE_INFO = select(*VILLAGE_INFO_COLUMNS).where(Village.id == _VILLAGE)
_TROOPS_HOME = select(Troop.unit, Troop.count).where(
    Troop.village_id == _VILLAGE, Troop.home_village_id == _VILLAGE, Troop.count > 0
)
_VILLAGE_AT = select(*VILLAGE_INFO_COLUMNS).where(
    Village.x == bindparam("x", type_=Integer), Village.y == bindparam("y", type_=Integer)
)
_ADD_TROOPS: dict[str, Insert] = {}  # by dialect: one row's upsert
_T = Troop.__table__.c
_TAKE_COUNT = bindparam("t_count", type_=Integer)
_TAKE_TROOPS = (
    update(Troop)
    .where(
        _T.village_id == bindparam("t_village", type_=BigInteger),
        _T.home_village_id == bindparam("t_home", type_=BigInteger),
        _T.unit == bindparam("t_unit", type_=String),
        _T.count >= _TAKE_COUNT,
    )
    .values(count=_T.count - _TAKE_COUNT)
    .returning(_T.count)
)  # one unit's troops taken, if all are there: a row back, or none


async def village_info(session: AsyncSession, village_id: int) -> VillageInfo | None:
    found = await driver.rows(session, _VILLAGE_INFO, {"village": village_id}, begin=False)
    return VillageInfo(*found[0]) if found else None


async def villages_info(session: AsyncSession, ids: Iterable[int]) -> dict[int, VillageInfo]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = await session.execute(select(*VILLAGE_INFO_COLUMNS).where(Village.id.in_(wanted)))
    return {r[0]: VillageInfo(*r) for r in rows}


async def village_at(session: AsyncSession, x: int, y: int) -> VillageInfo | None:
    found = await driver.rows(session, _VILLAGE_AT, {"x": x, "y": y}, begin=False)
    return VillageInfo(*found[0]) if found else None


async def troops_home(session: AsyncSession, village_id: int) -> dict[str, int]:
    """The village's own troops standing in it (not reinforcements from elsewhere)."""
    found = await driver.rows(session, _TROOPS_HOME, {"village": village_id}, begin=False)
    return {unit: count for unit, count in found}


async def troops_in(session: AsyncSession, village_id: int) -> dict[int, dict[str, int]]:
    """Every troop standing in the village, grouped by home village."""
    rows = await session.execute(
        select(Troop.home_village_id, Troop.unit, Troop.count).where(
            Troop.village_id == village_id, Troop.count > 0
        )
    )
    out: dict[int, dict[str, int]] = {}
    for home, unit, count in rows:
        out.setdefault(home, {})[unit] = count
    return out


async def change_rates(
    session: AsyncSession,
    village_id: int,
    at_ms: int,
    events: Scheduler,
    rate_deltas: Mapping[str, int] | None = None,
    caps: tuple[int, int] | None = None,
) -> dict[str, int]:
    """Settle the stock at ``at_ms``, then add ``rate_deltas`` and/or set ``caps`` (whole units).

    Rates change by deltas (a field's production step, a unit's upkeep) rather
    than being recomputed, so upkeep follows the documented rule exactly: the
    home village feeds its troops until the news of their death arrives. When
    net crop turns negative, a starvation event is scheduled for the exact ms
    the granary runs dry.
    """
    deltas = {r: d for r, d in (rate_deltas or {}).items() if d}
    row = await STOCKS.add_rates(
        session,
        village_id,
        deltas,
        at_ms,
        caps={"warehouse": caps[0], "granary": caps[1]} if caps else None,
    )
    _watch_starvation(events, village_id, at_ms, deltas, row)
    return {r: row[f"{r}_rate"] for r in RESOURCES}


async def change_rates_many(
    session: AsyncSession, changes: Sequence[RateChange], events: Scheduler
) -> None:
    """``change_rates`` for many villages, each change at its own time, in ``changes``'
    order: one statement on PostgreSQL for a batch of events (``Stocks.add_rates_many``)."""
    changes = [replace(ch, deltas={r: d for r, d in ch.deltas.items() if d}) for ch in changes]
    rows = await STOCKS.add_rates_many(session, changes)
    for ch, row in zip(changes, rows, strict=True):
        _watch_starvation(events, ch.village_id, ch.at_ms, ch.deltas, row)


def _watch_starvation(
    events: Scheduler,
    village_id: int,
    at_ms: int,
    deltas: Mapping[str, int],
    row: Mapping[str, int],
) -> None:
    """When a change turned net crop negative, check for starvation the exact ms the granary
    runs dry (``row``: the stock as the change left it, settled at ``at_ms``, or at its own
    time if settled later already)."""
    if deltas.get("crop", 0) < 0 and row["crop_rate"] < 0:
        due = starvation_time_ms(row["crop"], row["crop_rate"], at_ms)
        if due is not None:
            events.schedule(STARVATION, village_id, due, {})


async def stock_row(session: AsyncSession, village_id: int) -> dict[str, int]:
    """The village's ``village_stock`` row as a dict (fixed-point stocks and caps, rates)."""
    return await STOCKS.read(session, village_id)


def _upsert(session: AsyncSession) -> Any:
    return pg_insert if driver.dialect_name(session) == "postgresql" else sqlite_insert


def _adding_troops(session: AsyncSession) -> Insert:
    """An upsert adding the count it runs with to the troops at its key."""
    return _adding(_upsert(session)(Troop))


def _adding(stmt: Any) -> Insert:
    """``stmt`` (an insert of troop rows) adding each row's count to the troops at its key."""
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=["village_id", "home_village_id", "unit"],
        set_={"count": Troop.count + stmt.excluded.count},
    )


async def add_troops(
    session: AsyncSession, village_id: int, home_village_id: int, troops: Mapping[str, int]
) -> None:
    await add_troop_counts(
        session,
        [
            {"village_id": village_id, "home_village_id": home_village_id, "unit": u, "count": n}
            for u, n in troops.items()
            if n > 0
        ],
    )


_TROOP_KEY_COUNT = ("village_id", "home_village_id", "unit", "count")


def _adding_many_troops() -> Insert:
    """PostgreSQL's upsert of many rows given as arrays (a statement built once, whatever
    the number of rows)."""
    kinds = (BigInteger, BigInteger, Text, BigInteger)  # text[]: a type asyncpg knows
    given = select(
        *(
            func.unnest(bindparam(f"many_{name}", type_=ARRAY(kind))).label(name)
            for name, kind in zip(_TROOP_KEY_COUNT, kinds, strict=True)
        )
    )
    return _adding(pg_insert(Troop).from_select(list(_TROOP_KEY_COUNT), given))


_ADD_MANY_TROOPS = _adding_many_troops()


async def add_troop_counts(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Add each row's ``count`` (may be negative) to the troops at its key (each key once):
    one statement on PostgreSQL, one per row on SQLite (no round trips), each built once."""
    dialect = driver.dialect_name(session)
    if len(rows) > 1 and dialect == "postgresql":
        arrays = {f"many_{name}": [row[name] for row in rows] for name in _TROOP_KEY_COUNT}
        await driver.rows(session, _ADD_MANY_TROOPS, arrays)
        return
    stmt = _ADD_TROOPS.get(dialect)
    if stmt is None:
        stmt = _ADD_TROOPS[dialect] = _adding_troops(session)
    for row in rows:
        await driver.rows(session, stmt, row)


async def take_troops(
    session: AsyncSession, village_id: int, home_village_id: int, troops: Mapping[str, int]
) -> bool:
    """Remove ``troops`` if all are there; a conditional UPDATE per unit, so never below zero."""
    for unit, count in troops.items():
        if count <= 0:
            continue
        key = {"t_village": village_id, "t_home": home_village_id, "t_unit": unit}
        if not await driver.rows(session, _TAKE_TROOPS, {**key, "t_count": count}):
            return False
    return True


async def remove_losses(
    session: AsyncSession, village_id: int, losses_by_home: Mapping[int, Mapping[str, int]]
) -> None:
    """Subtract battle losses from the troops standing in ``village_id``; drop empty rows."""
    for home, losses in losses_by_home.items():
        for unit, lost in losses.items():
            await session.execute(
                update(Troop)
                .where(
                    Troop.village_id == village_id,
                    Troop.home_village_id == home,
                    Troop.unit == unit,
                )
                .values(count=Troop.count - lost)
                .execution_options(synchronize_session=False)
            )
    await session.execute(
        delete(Troop).where(and_(Troop.village_id == village_id, Troop.count <= 0))
    )


async def add_report(
    session: AsyncSession,
    player_id: int | None,
    kind: str,
    title: str,
    body: dict[str, Any],
    at_ms: int,
) -> int | None:
    """File a report for ``player_id`` (nobody gets one for an abandoned village)."""
    if player_id is None:
        return None
    inserted = await session.execute(
        insert(Report)
        .values(
            player_id=player_id,
            kind=kind,
            title=title,
            body=body,
            created_ms=at_ms,
            is_read=False,
        )
        .returning(Report.id)
    )
    return int(inserted.scalar_one())
