"""The reads and writes of a ``BatchState``: one statement per table and batch.

Two implementations of the same statements. ``CoreIO`` is portable SQLAlchemy
Core (SQLite, and any database). ``AsyncpgIO`` is PostgreSQL's: ids and
column values travel as arrays (``= ANY($1)``, ``unnest``) on the session's own
asyncpg connection, so a batch of hundreds of rows costs a handful of
statements and no per-row parameter processing in Python — at thousands of
events per second that processing was a third of a march arrival's cost.
Both run inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from sqlalchemy import Table, bindparam, delete, insert, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import json_dumps
from db.models import Village
from refgame.models import Building, March, PlayerPoints, Report, Troop
from refgame.resources import RESOURCES, STOCKS
from refgame.state import VILLAGE_INFO_COLUMNS, VillageInfo, add_troop_counts

STOCK_COLUMNS = (*RESOURCES, *(f"{r}_rate" for r in RESOURCES), "warehouse_cap",
                 "granary_cap", "updated_ms")  # fmt: skip
REPORT_COLUMNS = ("player_id", "kind", "title", "body", "created_ms")
TroopKey = tuple[int, int, str]  # (village_id, home_village_id, unit)


@dataclass(frozen=True, slots=True)
class MarchRow:
    id: int
    kind: str
    origin_village_id: int
    target_village_id: int
    troops: dict[str, int]
    loot: dict[str, int]
    depart_ms: int


class BatchIO(Protocol):
    """Reads lock what the batch rewrites (troops, stocks) on databases with row locks."""

    async def marches(self, ids: Sequence[int]) -> list[MarchRow]: ...
    async def troops(self, village_ids: Sequence[int]) -> list[tuple[int, int, str, int]]: ...
    async def stocks(self, village_ids: Sequence[int]) -> list[dict[str, int]]: ...
    async def villages(self, ids: Sequence[int]) -> list[VillageInfo]: ...
    async def walls(self, village_ids: Sequence[int]) -> list[tuple[int, int]]: ...
    async def write_stocks(self, rows: Sequence[dict[str, int]]) -> None: ...
    async def add_troop_counts(self, deltas: Sequence[tuple[TroopKey, int]]) -> None: ...
    async def delete_empty_troops(self, village_ids: Sequence[int]) -> None: ...
    async def delete_marches(self, ids: Sequence[int]) -> None: ...
    async def turn_marches_home(self, rows: Sequence[dict[str, Any]]) -> None: ...
    async def insert_reports(self, rows: Sequence[dict[str, Any]]) -> None: ...
    async def add_points(self, rows: Sequence[tuple[int, int, int]]) -> None: ...


async def batch_io(session: AsyncSession) -> BatchIO:
    """The fastest implementation for the session's database."""
    if session.get_bind().dialect.name != "postgresql":
        return CoreIO(session)
    connection = await session.connection()
    driver = (await connection.get_raw_connection()).driver_connection
    assert driver is not None  # None only for an invalidated connection; ours is open
    if not driver.is_in_transaction():
        # SQLAlchemy's adapter opens the database transaction at its first statement;
        # open it now, or the raw statements below would each commit on their own
        await session.execute(select(literal(1)))
    return AsyncpgIO(driver)


# ---- portable: SQLAlchemy Core ------------------------------------------------------------

# the declarative stubs type ``__table__`` as any FromClause; these classes map Tables
_T, _M, _R = (cast(Table, m.__table__) for m in (Troop, March, Report))
_S = STOCKS.table


class CoreIO:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def marches(self, ids: Sequence[int]) -> list[MarchRow]:
        rows = await self.session.execute(
            select(_M.c.id, _M.c.kind, _M.c.origin_village_id, _M.c.target_village_id,
                   _M.c.troops, _M.c.loot, _M.c.depart_ms).where(_M.c.id.in_(ids))
        )  # fmt: skip
        return [MarchRow(*r) for r in rows]

    async def troops(self, village_ids: Sequence[int]) -> list[tuple[int, int, str, int]]:
        rows = await self.session.execute(
            select(_T.c.village_id, _T.c.home_village_id, _T.c.unit, _T.c.count)
            .where(_T.c.village_id.in_(village_ids))
            .order_by(_T.c.village_id, _T.c.home_village_id, _T.c.unit)
            .with_for_update()
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    async def stocks(self, village_ids: Sequence[int]) -> list[dict[str, int]]:
        rows = await self.session.execute(
            select(_S).where(_S.c.village_id.in_(village_ids)).order_by(_S.c.village_id)
            .with_for_update()
        )  # fmt: skip
        return [dict(r._mapping) for r in rows]

    async def villages(self, ids: Sequence[int]) -> list[VillageInfo]:
        rows = await self.session.execute(select(*VILLAGE_INFO_COLUMNS).where(Village.id.in_(ids)))
        return [VillageInfo(*r) for r in rows]

    async def walls(self, village_ids: Sequence[int]) -> list[tuple[int, int]]:
        rows = await self.session.execute(
            select(Building.village_id, Building.level).where(
                Building.village_id.in_(village_ids), Building.kind == "wall"
            )
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    async def write_stocks(self, rows: Sequence[dict[str, int]]) -> None:
        params = [{"b_village_id": r["village_id"], **{f"b_{c}": r[c] for c in STOCK_COLUMNS}}
                  for r in rows]  # fmt: skip
        await self.session.execute(_UPDATE_STOCK, params)

    async def add_troop_counts(self, deltas: Sequence[tuple[TroopKey, int]]) -> None:
        await add_troop_counts(
            self.session,
            [{"village_id": v, "home_village_id": h, "unit": u, "count": d}
             for (v, h, u), d in deltas],
        )  # fmt: skip

    async def delete_empty_troops(self, village_ids: Sequence[int]) -> None:
        await self.session.execute(
            delete(Troop).where(Troop.village_id.in_(village_ids), Troop.count <= 0)
        )

    async def delete_marches(self, ids: Sequence[int]) -> None:
        await self.session.execute(delete(March).where(March.id.in_(ids)))

    async def turn_marches_home(self, rows: Sequence[dict[str, Any]]) -> None:
        await self.session.execute(_UPDATE_MARCH, list(rows))

    async def insert_reports(self, rows: Sequence[dict[str, Any]]) -> None:
        await self.session.execute(insert(_R), [{**r, "is_read": False} for r in rows])

    async def add_points(self, rows: Sequence[tuple[int, int, int]]) -> None:
        dialect = self.session.get_bind().dialect.name
        stmt = (pg_insert if dialect == "postgresql" else sqlite_insert)(PlayerPoints).values(
            [{"player_id": p, "attack_points": a, "defence_points": d} for p, a, d in rows]
        )
        await self.session.execute(
            stmt.on_conflict_do_update(
                index_elements=["player_id"],
                set_={
                    "attack_points": PlayerPoints.attack_points + stmt.excluded.attack_points,
                    "defence_points": PlayerPoints.defence_points + stmt.excluded.defence_points,
                },
            )
        )


_UPDATE_STOCK = (
    update(_S)
    .where(_S.c.village_id == bindparam("b_village_id"))
    .values({c: bindparam(f"b_{c}") for c in STOCK_COLUMNS})
)
_MARCH_RETURN_COLUMNS = ("kind", "troops", "loot", "depart_ms", "arrive_ms", "event_id")
_UPDATE_MARCH = (
    update(_M)
    .where(_M.c.id == bindparam("march_id"))
    .values({c: bindparam(c) for c in _MARCH_RETURN_COLUMNS})
)


# ---- PostgreSQL: arrays on the raw asyncpg connection -------------------------------------

_STOCK_SET = ", ".join(f"{c} = u.{c}" for c in STOCK_COLUMNS)
_STOCK_UNNEST = ", ".join(f"${i + 2}::bigint[]" for i in range(len(STOCK_COLUMNS)))


class AsyncpgIO:
    """``CoreIO``'s statements for PostgreSQL. JSON columns go in and out as text
    (SQLAlchemy's asyncpg dialect installs a json codec of text in, parsed out)."""

    def __init__(self, connection: Any) -> None:
        self.conn = connection

    async def marches(self, ids: Sequence[int]) -> list[MarchRow]:
        rows = await self.conn.fetch(
            "SELECT id, kind, origin_village_id, target_village_id, troops, loot, depart_ms "
            "FROM marches WHERE id = ANY($1::bigint[])",
            list(ids),
        )
        return [MarchRow(*r) for r in rows]

    async def troops(self, village_ids: Sequence[int]) -> list[tuple[int, int, str, int]]:
        rows = await self.conn.fetch(
            "SELECT village_id, home_village_id, unit, count FROM troops "
            "WHERE village_id = ANY($1::bigint[]) "
            "ORDER BY village_id, home_village_id, unit FOR UPDATE",
            list(village_ids),
        )
        return [tuple(r) for r in rows]

    async def stocks(self, village_ids: Sequence[int]) -> list[dict[str, int]]:
        rows = await self.conn.fetch(
            f"SELECT village_id, {', '.join(STOCK_COLUMNS)} FROM village_stock "
            "WHERE village_id = ANY($1::bigint[]) ORDER BY village_id FOR UPDATE",
            list(village_ids),
        )
        return [dict(r) for r in rows]

    async def villages(self, ids: Sequence[int]) -> list[VillageInfo]:
        rows = await self.conn.fetch(
            "SELECT id, player_id, name, x, y FROM villages WHERE id = ANY($1::bigint[])",
            list(ids),
        )
        return [VillageInfo(*r) for r in rows]

    async def walls(self, village_ids: Sequence[int]) -> list[tuple[int, int]]:
        rows = await self.conn.fetch(
            "SELECT village_id, level FROM buildings "
            "WHERE village_id = ANY($1::bigint[]) AND kind = 'wall'",
            list(village_ids),
        )
        return [tuple(r) for r in rows]

    async def write_stocks(self, rows: Sequence[dict[str, int]]) -> None:
        await self.conn.execute(
            f"UPDATE village_stock AS s SET {_STOCK_SET} "
            f"FROM unnest($1::bigint[], {_STOCK_UNNEST}) "
            f"AS u(village_id, {', '.join(STOCK_COLUMNS)}) WHERE s.village_id = u.village_id",
            [r["village_id"] for r in rows],
            *([r[c] for r in rows] for c in STOCK_COLUMNS),
        )

    async def add_troop_counts(self, deltas: Sequence[tuple[TroopKey, int]]) -> None:
        await self.conn.execute(
            "INSERT INTO troops (village_id, home_village_id, unit, count) "
            "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) "
            "ON CONFLICT (village_id, home_village_id, unit) "
            "DO UPDATE SET count = troops.count + excluded.count",
            [k[0] for k, _ in deltas],
            [k[1] for k, _ in deltas],
            [k[2] for k, _ in deltas],
            [d for _, d in deltas],
        )

    async def delete_empty_troops(self, village_ids: Sequence[int]) -> None:
        await self.conn.execute(
            "DELETE FROM troops WHERE village_id = ANY($1::bigint[]) AND count <= 0",
            list(village_ids),
        )

    async def delete_marches(self, ids: Sequence[int]) -> None:
        await self.conn.execute("DELETE FROM marches WHERE id = ANY($1::bigint[])", list(ids))

    async def turn_marches_home(self, rows: Sequence[dict[str, Any]]) -> None:
        await self.conn.execute(
            "UPDATE marches AS m SET kind = u.kind, troops = u.troops::json, "
            "loot = u.loot::json, depart_ms = u.depart_ms, arrive_ms = u.arrive_ms, "
            "event_id = u.event_id "
            "FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], "
            "$6::bigint[], $7::bigint[]) "
            "AS u(id, kind, troops, loot, depart_ms, arrive_ms, event_id) WHERE m.id = u.id",
            [r["march_id"] for r in rows],
            [r["kind"] for r in rows],
            [json_dumps(r["troops"]) for r in rows],
            [json_dumps(r["loot"]) for r in rows],
            [r["depart_ms"] for r in rows],
            [r["arrive_ms"] for r in rows],
            [r["event_id"] for r in rows],
        )

    async def insert_reports(self, rows: Sequence[dict[str, Any]]) -> None:
        await self.conn.execute(
            "INSERT INTO reports (player_id, kind, title, body, created_ms, is_read) "
            "SELECT p, k, t, b::json, c, false "
            "FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[]) "
            "AS u(p, k, t, b, c)",
            *([r[c] if c != "body" else json_dumps(r[c]) for r in rows] for c in REPORT_COLUMNS),
        )

    async def add_points(self, rows: Sequence[tuple[int, int, int]]) -> None:
        await self.conn.execute(
            "INSERT INTO player_points (player_id, attack_points, defence_points) "
            "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) "
            "ON CONFLICT (player_id) DO UPDATE SET "
            "attack_points = player_points.attack_points + excluded.attack_points, "
            "defence_points = player_points.defence_points + excluded.defence_points",
            *([r[i] for r in rows] for i in range(3)),
        )
