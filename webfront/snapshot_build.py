"""``build_snapshots``: the whole snapshots of a batch of players from ONE SQL statement.

The parts of a snapshot (the player, villages with stocks, buildings, build and
training queues, troops, marches) are read by one ``UNION ALL`` whose rows
share a generic layout: ``owner`` is the player the row is for, ``part`` says
which table it comes from, and ``i1..i14`` (integers), ``s1..s3`` (strings) and
``j1, j2`` (JSON) carry its columns. A batch costs one round trip and one
executor start however many players it holds: when many players change at once
(a batch of events), their polls are answered by a few statements, not one each
(``webfront.snapshot_reads``). One statement is one round trip, and one consistent view of the
data: separate statements would each wait for the event loop in turn (a loaded
web process runs a full iteration, milliseconds, between two of them) and could
each see a different commit. It is built once, with the player ids as one bound
parameter (an array on PostgreSQL, a JSON array on SQLite), so its compiled form
is cached too. On SQLite it runs in one hop to
aiosqlite's thread (``_sqlite_rows``), on PostgreSQL straight on asyncpg
(``_asyncpg_rows``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    String,
    bindparam,
    cast,
    false,
    func,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute, aliased
from sqlalchemy.sql.compiler import SQLCompiler

from common.amounts import SCALE
from db.models import (
    Building,
    BuildOrder,
    March,
    Player,
    Report,
    TrainingOrder,
    Troop,
    Village,
    VillageStock,
)

_INTS, _STRS, _JSONS = 14, 3, 2
Column = ColumnElement[Any] | QueryableAttribute[Any]
HEAD, VILLAGE, BUILDING, BUILD_ORDER, TRAINING, TROOPS, MARCH = range(7)


def _part(
    owner: Column,
    part: int,
    ints: Sequence[Any] = (),
    strs: Sequence[Any] = (),
    jsons: Sequence[Any] = (),
) -> list[ColumnElement[Any]]:
    """The generic columns of one part; a missing or None column is a typed NULL."""

    def pad(values: Sequence[Any], size: int, type_: Any, name: str) -> list[ColumnElement[Any]]:
        out = list(values) + [None] * (size - len(values))
        return [
            (cast(null(), type_) if v is None else v).label(f"{name}{n + 1}")
            for n, v in enumerate(out)
        ]

    return [
        owner.label("owner"),
        literal_column(str(part), Integer).label("part"),
        *pad(ints, _INTS, BigInteger, "i"),
        *pad(strs, _STRS, String, "s"),
        *pad(jsons, _JSONS, JSON, "j"),
    ]


class _Batch(ColumnElement[bool]):
    """``column`` is one of the batch's player ids, the one ``ids`` parameter: an array on
    PostgreSQL, a JSON array (text) elsewhere (SQLite has no arrays)."""

    # no Boolean type: SQLite's compiler would add "= 1", and SQLite then uses no index
    inherit_cache = False  # compiled once per dialect below (_compiled)

    def __init__(self, column: Column) -> None:
        self.column = column


@compiles(_Batch)
def _batch_json(element: _Batch, compiler: Any, **kw: Any) -> str:
    ids = compiler.process(bindparam("ids", type_=String), **kw)
    return f"{compiler.process(element.column, **kw)} IN (SELECT value FROM json_each({ids}))"


@compiles(_Batch, "postgresql")
def _batch_array(element: _Batch, compiler: Any, **kw: Any) -> str:
    ids = compiler.process(bindparam("ids", type_=ARRAY(BigInteger)), **kw)
    return f"{compiler.process(element.column, **kw)} = ANY({ids})"


def _statement() -> Select[Any]:
    # Every part filters the batch on an indexed player id of its own, so the database
    # drives each part from the batch's ids through indexes (a test reads SQLite's plan).
    unread = (
        select(func.count())
        .where(Report.player_id == Player.id, Report.is_read == false())
        .scalar_subquery()
    )
    s = VillageStock
    # ``v``: the owner's village of a row; ``other``: the far end of a troop row, which may
    # be the owner's too (such rows come once, from the first of the two troop parts)
    v, other = aliased(Village), aliased(Village)
    origin, target = aliased(Village), aliased(Village)
    owner = v.player_id
    in_batch = _Batch(v.player_id)
    # Sorted by (owner, part, i1, i2, s1): each part puts its sort keys there.
    parts = [
        select(*_part(Player.id, HEAD, [unread], [Player.name])).where(_Batch(Player.id)),
        select(
            *_part(
                owner,
                VILLAGE,
                [
                    v.id,
                    v.x,
                    v.y,
                    s.updated_ms,
                    s.wood,
                    s.clay,
                    s.iron,
                    s.crop,
                    s.wood_rate,
                    s.clay_rate,
                    s.iron_rate,
                    s.crop_rate,
                    s.warehouse_cap,
                    s.granary_cap,
                ],
                [v.name],
            )
        )
        .join_from(v, s, s.village_id == v.id)
        .where(in_batch),
        select(
            *_part(owner, BUILDING, [Building.village_id, None, Building.level], [Building.kind])
        )
        .join_from(v, Building, Building.village_id == v.id)
        .where(in_batch),
        select(
            *_part(
                owner,
                BUILD_ORDER,
                [
                    BuildOrder.done_ms,
                    BuildOrder.id,
                    BuildOrder.village_id,
                    BuildOrder.target_level,
                    BuildOrder.started_ms,
                ],
                [BuildOrder.kind],
            )
        )
        .join_from(v, BuildOrder, BuildOrder.village_id == v.id)
        .where(in_batch),
        select(
            *_part(
                owner,
                TRAINING,
                [
                    TrainingOrder.done_ms,
                    TrainingOrder.id,
                    TrainingOrder.village_id,
                    TrainingOrder.count,
                    TrainingOrder.started_ms,
                ],
                [TrainingOrder.unit],
            )
        )
        .join_from(v, TrainingOrder, TrainingOrder.village_id == v.id)
        .where(in_batch),
        # troops standing in the owner's villages (at home, or reinforcements)...
        select(
            *_part(
                owner, TROOPS, [Troop.village_id, Troop.home_village_id, Troop.count], [Troop.unit]
            )
        )
        .join_from(v, Troop, Troop.village_id == v.id)
        .where(in_batch, Troop.count > 0),
        # ... and the owner's troops standing in other players' villages
        select(
            *_part(
                owner, TROOPS, [Troop.village_id, Troop.home_village_id, Troop.count], [Troop.unit]
            )
        )
        .join_from(v, Troop, Troop.home_village_id == v.id)
        .join(other, other.id == Troop.village_id)
        .where(in_batch, Troop.count > 0, other.player_id.is_distinct_from(owner)),
    ]
    march_columns = (
        [
            March.arrive_ms,
            March.id,
            March.origin_village_id,
            March.target_village_id,
            March.depart_ms,
            origin.x,
            origin.y,
            target.x,
            target.y,
        ],
        [March.kind, origin.name, target.name],
        [March.troops, March.loot],
    )
    parts += [
        # marches from the owner's villages...
        select(*_part(origin.player_id, MARCH, *march_columns))
        .join_from(origin, March, March.origin_village_id == origin.id)
        .outerjoin(target, target.id == March.target_village_id)
        .where(_Batch(origin.player_id)),
        # ... and marches to them from anyone else's
        select(*_part(target.player_id, MARCH, *march_columns))
        .join_from(target, March, March.target_village_id == target.id)
        .outerjoin(origin, origin.id == March.origin_village_id)
        .where(_Batch(target.player_id), origin.player_id.is_distinct_from(target.player_id)),
    ]
    rows = union_all(*parts).subquery("parts")
    return select(rows).order_by(rows.c.owner, rows.c.part, rows.c.i1, rows.c.i2, rows.c.s1)


SNAPSHOT_STATEMENT = _statement()


def _village(i: Sequence[Any], name: str) -> dict[str, Any]:
    village_id, x, y, updated_ms = i[0], i[1], i[2], i[3]
    stocks: dict[str, Any] = {"updated_ms": updated_ms, "scale": SCALE}
    for n, res in enumerate(("wood", "clay", "iron", "crop")):
        fixed, rate = i[4 + n], i[8 + n]
        cap = i[13] if res == "crop" else i[12]
        stocks[res] = {
            "units": fixed // SCALE,
            "fixed": fixed,
            "rate_per_hour": rate,
            "cap": cap // SCALE,
        }
    return {
        "id": village_id,
        "name": name,
        "x": x,
        "y": y,
        "stocks": stocks,
        "buildings": {},
        "build_queue": [],
        "troops": {},
        "reinforcements": [],
        "troops_away": [],
        "training_queue": [],
        "marches_out": [],
        "marches_in": [],
    }


async def build_snapshots(
    conn: AsyncConnection, player_ids: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """The snapshots (without ``server_time_ms``) of the players that exist among
    ``player_ids`` (a deleted player whose session outlived them has none)."""
    ids = sorted(set(player_ids))
    if conn.dialect.name == "sqlite":
        rows = await _sqlite_rows(conn, ids)
    elif conn.dialect.driver == "asyncpg":
        rows = await _asyncpg_rows(conn, ids)
    else:
        rows = (
            await conn.execute(SNAPSHOT_STATEMENT, {"ids": _ids_value(conn.dialect, ids)})
        ).all()
    snapshots: dict[int, dict[str, Any]] = {}
    start = 0
    for end in range(1, len(rows) + 1):  # rows come grouped by owner, its HEAD row first
        if end == len(rows) or rows[end][0] != rows[start][0]:
            if rows[start][1] == HEAD:
                snapshots[rows[start][0]] = _snapshot(rows[start][0], rows[start:end])
            start = end
    return snapshots


def _snapshot(player_id: int, owned: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """One player's snapshot from its rows (``owner, part, i.., s.., j..``), HEAD first."""
    head = owned[0]
    villages: dict[int, dict[str, Any]] = {}
    for row in owned[1:]:
        part = row[1]
        i, s, j = row[2 : 2 + _INTS], row[2 + _INTS : 2 + _INTS + _STRS], row[-_JSONS:]
        if part == VILLAGE:
            villages[i[0]] = _village(i, s[0])
        elif part == BUILDING:
            villages[i[0]]["buildings"][s[0]] = i[2]
        elif part == BUILD_ORDER:
            villages[i[2]]["build_queue"].append(
                {
                    "id": i[1],
                    "kind": s[0],
                    "target_level": i[3],
                    "started_ms": i[4],
                    "done_ms": i[0],
                }
            )
        elif part == TRAINING:
            villages[i[2]]["training_queue"].append(
                {"id": i[1], "unit": s[0], "count": i[3], "started_ms": i[4], "done_ms": i[0]}
            )
        elif part == TROOPS:
            _add_troops(villages, i[0], i[1], s[0], i[2])
        elif part == MARCH:
            _add_march(villages, i, s, j)
    return {
        "player_id": player_id,
        "name": head[2 + _INTS],
        "unread_reports": int(head[2]),
        "villages": list(villages.values()),
    }


_COMPILED: dict[Dialect, SQLCompiler] = {}


def _compiled(dialect: Dialect) -> SQLCompiler:
    compiled = _COMPILED.get(dialect)
    if compiled is None:
        compiled = SNAPSHOT_STATEMENT.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        _COMPILED[dialect] = compiled
    return compiled


def _ids_value(dialect: Dialect, ids: Sequence[int]) -> Any:
    """The ``ids`` parameter: an array on PostgreSQL, JSON text elsewhere (see ``_Batch``)."""
    return list(ids) if dialect.name == "postgresql" else json.dumps(list(ids))


def _params(compiled: SQLCompiler, dialect: Dialect, ids: Sequence[int]) -> tuple[Any, ...]:
    values = compiled.construct_params({"ids": _ids_value(dialect, ids)}) or {}
    return tuple(values[name] for name in compiled.positiontup or ())


async def _sqlite_rows(conn: AsyncConnection, ids: Sequence[int]) -> Sequence[Sequence[Any]]:
    """The statement's rows in ONE hop to aiosqlite's thread and back.

    aiosqlite runs every DBAPI call in its thread; SQLAlchemy makes four per statement
    (cursor, execute, fetch, close), and each hop back waits for a loaded event loop.
    ``execute_fetchall`` is one. Only the JSON columns need decoding.
    """
    compiled = _compiled(conn.dialect)
    raw = await conn.get_raw_connection()
    rows = await raw.driver_connection.execute_fetchall(  # type: ignore[union-attr]
        compiled.string, _params(compiled, conn.dialect, ids)
    )
    loads = getattr(conn.dialect, "_json_deserializer", None) or json.loads
    return [
        (*row[:-_JSONS], *(None if v is None else loads(v) for v in row[-_JSONS:])) for row in rows
    ]


async def _asyncpg_rows(conn: AsyncConnection, ids: Sequence[int]) -> Sequence[Sequence[Any]]:
    """The statement's rows straight from asyncpg (its own prepared-statement cache; JSON is
    decoded by the codec SQLAlchemy installed): a fraction of the CPU of SQLAlchemy's
    execution and result layers, which a burst of builds waits behind.

    Any failure is left to SQLAlchemy: the statement runs again through it, which turns the
    error into a ``DBAPIError`` and invalidates a connection the server dropped (so the
    caller's one retry gets a new one).
    """
    compiled = _compiled(conn.dialect)
    raw = await conn.get_raw_connection()
    try:
        return await raw.driver_connection.fetch(  # type: ignore[union-attr,no-any-return]
            compiled.string, *_params(compiled, conn.dialect, ids)
        )
    except Exception:
        return (
            await conn.execute(SNAPSHOT_STATEMENT, {"ids": _ids_value(conn.dialect, ids)})
        ).all()


def _add_troops(
    villages: dict[int, dict[str, Any]], village_id: int, home_id: int, unit: str, count: int
) -> None:
    if village_id == home_id:
        villages[village_id]["troops"][unit] = count
        return
    if village_id in villages:
        villages[village_id]["reinforcements"].append(
            {"village_id": home_id, "unit": unit, "count": count}
        )
    if home_id in villages:
        villages[home_id]["troops_away"].append(
            {"village_id": village_id, "unit": unit, "count": count}
        )


def _add_march(
    villages: dict[int, dict[str, Any]], i: Sequence[Any], s: Sequence[Any], j: Sequence[Any]
) -> None:
    arrive_ms, march_id, origin_id, target_id, depart_ms, ox, oy, tx, ty = i[:9]
    kind, origin_name, target_name = s
    troops, loot = j
    # A march's origin is its troops' home, on the way back too: a return march is
    # coming home to its origin, and the village it leaves does not see it.
    mine = origin_id in villages
    march = {
        "id": march_id,
        "kind": kind,
        "origin": {"id": origin_id, "x": ox, "y": oy, "name": origin_name},
        "target": {"id": target_id, "x": tx, "y": ty, "name": target_name},
        "depart_ms": depart_ms,
        "arrive_ms": arrive_ms,
        "troops": dict(troops) if mine else None,
        "loot": dict(loot or {}) if mine else None,
    }
    if kind == "return":
        if mine:
            villages[origin_id]["marches_in"].append(march)
        return
    if mine:
        villages[origin_id]["marches_out"].append(march)
    if target_id in villages:
        villages[target_id]["marches_in"].append(march)
