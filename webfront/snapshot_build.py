"""``build_snapshots``: the whole snapshots of a batch of players from ONE SQL statement.

The parts of a snapshot are the framework's (the player, their villages with
stocks, columns built from the game's ``Stocks``) and the game's
(``Game.snapshot_parts``: buildings, queues, troops, marches, unread reports for
the reference game). They are read by one ``UNION ALL`` whose rows share a generic
layout: ``owner`` is the player the row is for, ``part`` says which part it comes
from, and ``i1..iN`` (integers), ``s1..sM`` (strings) and ``j1..jK`` (JSON) carry
its columns; a game part's columns go to the slots of their type, in order. A batch
costs one round trip and one executor start however many players it holds: when
many players change at once (a batch of events), their polls are answered by a few
statements, not one each (``webfront.snapshot_reads``). One statement is one round
trip, and one consistent view of the data: separate statements would each wait for
the event loop in turn (a loaded web process runs a full iteration, milliseconds,
between two of them) and could each see a different commit. It is built once per
game, with the player ids as one bound parameter (an array on PostgreSQL, a JSON
array on SQLite), so its compiled form is cached too. On SQLite it runs in one hop
to aiosqlite's thread (``_sqlite_rows``), on PostgreSQL straight on asyncpg
(``_asyncpg_rows``).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Sequence
from dataclasses import dataclass
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
    literal_column,
    null,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute, aliased
from sqlalchemy.sql import sqltypes
from sqlalchemy.sql.compiler import SQLCompiler

from common.amounts import SCALE
from db.models import Player, Village
from db.stock import Stocks
from gameapi.game import Game, SnapshotPart
from gameapi.stocks import stocks_of

Column = ColumnElement[Any] | QueryableAttribute[Any]
HEAD, VILLAGE, FIRST_GAME_PART = 0, 1, 2
SHAPES = ("list", "map", "value", "object")
_KINDS = ("i", "s", "j")


def _kind(type_: Any) -> str:
    """The slot kind of a column type: integer, string or JSON."""
    if isinstance(type_, sqltypes.Integer):
        return "i"
    if isinstance(type_, sqltypes.String):
        return "s"
    if isinstance(type_, sqltypes.JSON):
        return "j"
    raise TypeError(f"a snapshot part's columns are integers, strings or JSON, not {type_!r}")


class _Batch(ColumnElement[bool]):
    """``column`` is one of the batch's player ids, the one ``ids`` parameter: an array on
    PostgreSQL, a JSON array (text) elsewhere (SQLite has no arrays)."""

    # no Boolean type: SQLite's compiler would add "= 1", and SQLite then uses no index
    inherit_cache = False  # compiled once per dialect (SnapshotBuilder.compiled)

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


@dataclass(frozen=True)
class _Part:
    """A game part in the union: where each of its columns sits in the generic row."""

    spec: SnapshotPart
    per_player: bool  # its first column is player_id (else place_id)
    names: tuple[str, ...]  # its columns after the first
    slots: tuple[int, ...]  # each one's position in the generic row
    sortable: tuple[int, ...]  # positions (in names) of the integer and string columns

    def row(self, generic: Sequence[Any]) -> list[Any]:
        return [generic[n] for n in self.slots]

    def sort_key(self, values: Sequence[Any]) -> tuple[tuple[bool, Any], ...]:
        return tuple((values[n] is None, values[n]) for n in self.sortable)


class SnapshotBuilder:
    """The one snapshot statement of a game and the code that turns its rows into JSON."""

    def __init__(self, stocks: Stocks, parts: Sequence[SnapshotPart] = ()) -> None:
        self.stocks = stocks
        # a village row: id, x, y, updated_ms, then the resource, rate and cap columns
        self.stock_columns = list(stocks.table.c)[3:]
        self.parts: list[_Part] = []
        self.place_keys: dict[str, str] = {}  # key -> shape, in the order declared
        self.player_keys: dict[str, str] = {}
        layouts = [self._layout(spec) for spec in parts]
        self.widths = {
            kind: max([minimum, *(sum(1 for k in kinds if k == kind) + (kind == "i")
                                  for _, _, kinds in layouts)])
            for kind, minimum in (("i", 4 + len(self.stock_columns)), ("s", 1), ("j", 0))
        }  # fmt: skip
        self._layouts = layouts
        for spec, sub, kinds in layouts:
            seen = {"i": 1, "s": 0, "j": 0}  # i1 is the place or the player
            positions = []
            for kind in kinds:
                positions.append(self._position(kind, seen[kind]))
                seen[kind] += 1
            columns = list(sub.c)
            self.parts.append(
                _Part(
                    spec,
                    columns[0].key == "player_id",
                    tuple(c.key for c in columns[1:]),
                    tuple(positions),
                    tuple(n for n, k in enumerate(kinds) if k != "j"),
                )
            )
        self.statement = self._statement(lateral=False)
        self.lateral_statement = self._statement(lateral=True)
        self._compiled: dict[Dialect, SQLCompiler] = {}

    # ---- the statement

    def _layout(self, spec: SnapshotPart) -> tuple[SnapshotPart, Any, list[str]]:
        """Check a part; its query as a subquery and the slot kind of each column after the
        first."""
        if spec.shape not in SHAPES:
            raise ValueError(f"snapshot part {spec.key!r}: shape {spec.shape!r} not in {SHAPES}")
        sub = spec.query().subquery()
        columns = list(sub.c)
        first = columns[0].key
        if first not in ("place_id", "player_id"):
            raise ValueError(
                f"snapshot part {spec.key!r}: the first column must be labelled place_id "
                f"or player_id, not {first!r}"
            )
        wanted = {"map": 3, "value": 2}.get(spec.shape)
        if wanted is not None and len(columns) != wanted:
            raise ValueError(
                f"snapshot part {spec.key!r}: a {spec.shape} has {wanted - 1} column(s) "
                "after the first"
            )
        keys = self.player_keys if first == "player_id" else self.place_keys
        if keys.setdefault(spec.key, spec.shape) != spec.shape:
            raise ValueError(f"snapshot parts {spec.key!r} differ in shape")
        return spec, sub, [_kind(column.type) for column in columns[1:]]

    def _columns(
        self,
        owner: Column,
        part: int,
        ints: Sequence[Any] = (),
        strs: Sequence[Any] = (),
        jsons: Sequence[Any] = (),
    ) -> list[ColumnElement[Any]]:
        """The generic columns of one part; a missing or None column is a typed NULL."""

        def pad(values: Sequence[Any], size: int, type_: Any, name: str) -> list[Any]:
            out = list(values) + [None] * (size - len(values))
            return [
                (cast(null(), type_) if v is None else v).label(f"{name}{n + 1}")
                for n, v in enumerate(out)
            ]

        return [
            owner.label("owner"),
            literal_column(str(part), Integer).label("part"),
            *pad(ints, self.widths["i"], BigInteger, "i"),
            *pad(strs, self.widths["s"], String, "s"),
            *pad(jsons, self.widths["j"], JSON, "j"),
        ]

    def _position(self, kind: str, index: int) -> int:
        """Where slot ``kind`` number ``index`` sits in a generic row."""
        offset = {"i": 2, "s": 2 + self.widths["i"], "j": 2 + self.widths["i"] + self.widths["s"]}
        return offset[kind] + index

    def _select(self, sub: Any, kinds: list[str], part: int, lateral: bool) -> Select[Any]:
        """A game part's rows in the generic layout, for the batch's players."""
        per_player = sub.c[0].key == "player_id"
        driver: Any = aliased(Player) if per_player else aliased(Village)
        owner = driver.id if per_player else driver.player_id
        if lateral:
            sub = _beside(driver, sub)
        columns = list(sub.c)
        typed: dict[str, list[Any]] = {"i": [columns[0]], "s": [], "j": []}
        for column, kind in zip(columns[1:], kinds, strict=True):
            typed[kind].append(column)
        if lateral:
            return (
                select(*self._columns(owner, part, typed["i"], typed["s"], typed["j"]))
                .join_from(driver, sub, true())
                .where(_Batch(owner))
            )
        if per_player:
            return select(
                *self._columns(columns[0], part, typed["i"], typed["s"], typed["j"])
            ).where(_Batch(columns[0]))
        return (
            select(*self._columns(owner, part, typed["i"], typed["s"], typed["j"]))
            .join_from(driver, sub, columns[0] == driver.id)
            .where(_Batch(owner))
        )

    def _statement(self, lateral: bool) -> Select[Any]:
        # Every part filters the batch on an indexed player id of its own, so the database
        # drives each part from the batch's ids through indexes (a test reads SQLite's plan;
        # another PostgreSQL's, see ``_beside``).
        v = aliased(Village)
        s = self.stocks.table
        stock: Any = _beside(v, s.select()) if lateral else s
        stock_on = true() if lateral else stock.c.village_id == v.id
        stock_columns = [stock.c[c.key] for c in self.stock_columns]
        parts = [
            select(*self._columns(Player.id, HEAD, [], [Player.name])).where(_Batch(Player.id)),
            select(
                *self._columns(
                    v.player_id, VILLAGE, [v.id, v.x, v.y, stock.c.updated_ms, *stock_columns],
                    [v.name],
                )
            )
            .join_from(v, stock, stock_on)
            .where(_Batch(v.player_id)),
            *(self._select(sub, kinds, number, lateral)
              for number, (_, sub, kinds) in enumerate(self._layouts, FIRST_GAME_PART)),
        ]  # fmt: skip
        rows = union_all(*parts).subquery("parts")
        return select(rows).order_by(rows.c.owner, rows.c.part, rows.c.i1)

    def statement_for(self, dialect: Dialect) -> Select[Any]:
        return self.lateral_statement if dialect.name == "postgresql" else self.statement

    def compiled(self, dialect: Dialect) -> SQLCompiler:
        compiled = self._compiled.get(dialect)
        if compiled is None:
            compiled = self.statement_for(dialect).compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            self._compiled[dialect] = compiled
        return compiled

    # ---- the rows

    def snapshots(self, rows: Sequence[Sequence[Any]]) -> dict[int, dict[str, Any]]:
        """The snapshots in ``rows`` (grouped by owner, the HEAD row of each first)."""
        snapshots: dict[int, dict[str, Any]] = {}
        start = 0
        for end in range(1, len(rows) + 1):
            if end == len(rows) or rows[end][0] != rows[start][0]:
                if rows[start][1] == HEAD:
                    snapshots[rows[start][0]] = self._snapshot(rows[start][0], rows[start:end])
                start = end
        return snapshots

    def _village(self, row: Sequence[Any]) -> dict[str, Any]:
        i = row[2 : 2 + self.widths["i"]]
        stocks: dict[str, Any] = {"updated_ms": i[3], "scale": SCALE}
        names, n_res = self.stocks.names, len(self.stocks.names)
        caps = dict(zip(self.stocks.caps, i[4 + 2 * n_res :], strict=False))
        for n, res in enumerate(names):
            fixed, rate, cap = i[4 + n], i[4 + n_res + n], caps[self.stocks.cap_of[res]]
            stocks[res] = {
                "units": fixed // SCALE,
                "fixed": fixed,
                "rate_per_hour": rate,
                "cap": cap // SCALE,
            }
        village = {"id": i[0], "name": row[2 + self.widths["i"]], "x": i[1], "y": i[2],
                   "stocks": stocks}  # fmt: skip
        for key, shape in self.place_keys.items():
            village[key] = _empty(shape)
        return village

    def _snapshot(self, player_id: int, owned: Sequence[Sequence[Any]]) -> dict[str, Any]:
        head = owned[0]
        own: dict[str, Any] = {key: _empty(shape) for key, shape in self.player_keys.items()}
        villages: dict[int, dict[str, Any]] = {}
        # (holder, key) -> [(sort key, part, values)]: rows of one list or map, sorted once
        pending: dict[tuple[int | None, str], list[tuple[Any, _Part, list[Any]]]] = {}
        for row in owned[1:]:
            number = row[1]
            if number == VILLAGE:
                villages[row[2]] = self._village(row)
                continue
            part = self.parts[number - FIRST_GAME_PART]
            values = part.row(row)
            holder = None if part.per_player else row[2]
            pending.setdefault((holder, part.spec.key), []).append(
                (part.sort_key(values), part, values)
            )
        for (holder, key), found in pending.items():
            target = own if holder is None else villages.get(holder)
            if target is None:
                continue
            found.sort(key=lambda item: item[0])
            target[key] = _fill(target[key], found, player_id)
        return {
            "player_id": player_id,
            "name": head[2 + self.widths["i"]],
            **own,
            "villages": list(villages.values()),
        }


def _beside(driver: Any, rows: Any) -> Any:
    """``rows`` (a query whose first column is a place's or a player's id) as a LATERAL
    subquery of one ``driver`` row (a village or a player), for PostgreSQL.

    Its planner chooses between a nested loop over the batch's few rows and a hash join
    that scans the whole table (every building of the world, to find a dozen) from its
    row estimates, and a generic plan cannot size the batch: the scan won whenever the
    statistics lagged behind the world (a fresh world, an operator's bulk load) or the
    table was small enough to look cheap. A lateral subquery that OFFSET 0 keeps from
    being flattened can only be joined by a nested loop, so each part is read through its
    own index from each of the batch's rows whatever the estimates say."""
    sub = rows.subquery() if isinstance(rows, Select) else rows
    return select(sub).where(sub.c[0] == driver.id).offset(literal_column("0")).lateral()


def _empty(shape: str) -> Any:
    return [] if shape == "list" else {} if shape == "map" else None


def _fill(current: Any, found: list[tuple[Any, _Part, list[Any]]], viewer_id: int) -> Any:
    """A list's, map's or value's content from its sorted rows."""
    _, first, _ = found[0]
    shape = first.spec.shape
    if shape == "value":
        return found[0][2][0]
    if shape == "object":
        row = dict(zip(first.names, found[0][2], strict=True))
        return row if first.spec.view is None else first.spec.view(row, viewer_id)
    if shape == "map":
        return {values[0]: values[1] for _, _, values in found}
    out = list(current)
    for _, part, values in found:
        item: dict[str, Any] | None = dict(zip(part.names, values, strict=True))
        if part.spec.view is not None:
            item = part.spec.view(item, viewer_id)  # type: ignore[arg-type]
        if item is not None:
            out.append(item)
    return out


# ---- the builder of the game this process runs


_BUILDERS: dict[int, tuple[Game, SnapshotBuilder]] = {}  # by id: a Game is not hashable


def builder_of(game: Game) -> SnapshotBuilder:
    """The snapshot statement of ``game`` (built once per game)."""
    found = _BUILDERS.get(id(game))
    if found is None or found[0] is not game:
        found = _BUILDERS[id(game)] = (game, SnapshotBuilder(stocks_of(game), game.snapshot_parts))
    return found[1]


# The builder ``build_snapshots`` uses: set by ``SnapshotReads`` for its reads (and by
# ``use_game`` for a whole process), so a caller needs no more than a connection.
CURRENT: contextvars.ContextVar[SnapshotBuilder | None] = contextvars.ContextVar(
    "snapshot_builder", default=None
)
_PROCESS: list[SnapshotBuilder] = []


def use_game(game: Game) -> SnapshotBuilder:
    """Make ``game`` the one whose snapshots this process builds (the web app does)."""
    builder = builder_of(game)
    _PROCESS[:] = [builder]
    return builder


def current_builder() -> SnapshotBuilder:
    builder = CURRENT.get() or (_PROCESS[0] if _PROCESS else None)
    if builder is None:
        raise RuntimeError("no game's snapshot is configured (webfront.snapshot_build.use_game)")
    return builder


async def build_snapshots(
    conn: AsyncConnection, player_ids: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """The snapshots (without ``server_time_ms``) of the players that exist among
    ``player_ids`` (a deleted player whose session outlived them has none)."""
    builder = current_builder()
    ids = sorted(set(player_ids))
    if conn.dialect.name == "sqlite":
        rows = await _sqlite_rows(builder, conn, ids)
    elif conn.dialect.driver == "asyncpg":
        rows = await _asyncpg_rows(builder, conn, ids)
    else:
        rows = await _sqlalchemy_rows(builder, conn, ids)
    return builder.snapshots(rows)


async def _sqlalchemy_rows(
    builder: SnapshotBuilder, conn: AsyncConnection, ids: Sequence[int]
) -> Sequence[Sequence[Any]]:
    statement = builder.statement_for(conn.dialect)
    return (await conn.execute(statement, {"ids": _ids_value(conn.dialect, ids)})).all()


def _compiled(dialect: Dialect) -> SQLCompiler:
    return current_builder().compiled(dialect)


def _ids_value(dialect: Dialect, ids: Sequence[int]) -> Any:
    """The ``ids`` parameter: an array on PostgreSQL, JSON text elsewhere (see ``_Batch``)."""
    return list(ids) if dialect.name == "postgresql" else json.dumps(list(ids))


def _params(compiled: SQLCompiler, dialect: Dialect, ids: Sequence[int]) -> tuple[Any, ...]:
    values = compiled.construct_params({"ids": _ids_value(dialect, ids)}) or {}
    return tuple(values[name] for name in compiled.positiontup or ())


async def _sqlite_rows(
    builder: SnapshotBuilder, conn: AsyncConnection, ids: Sequence[int]
) -> Sequence[Sequence[Any]]:
    """The statement's rows in ONE hop to aiosqlite's thread and back.

    aiosqlite runs every DBAPI call in its thread; SQLAlchemy makes four per statement
    (cursor, execute, fetch, close), and each hop back waits for a loaded event loop.
    ``execute_fetchall`` is one. Only the JSON columns need decoding.
    """
    compiled = builder.compiled(conn.dialect)
    raw = await conn.get_raw_connection()
    rows = await raw.driver_connection.execute_fetchall(  # type: ignore[union-attr]
        compiled.string, _params(compiled, conn.dialect, ids)
    )
    jsons = builder.widths["j"]
    if not jsons:
        return list(rows)
    loads = getattr(conn.dialect, "_json_deserializer", None) or json.loads
    return [
        (*row[:-jsons], *(None if v is None else loads(v) for v in row[-jsons:])) for row in rows
    ]


async def _asyncpg_rows(
    builder: SnapshotBuilder, conn: AsyncConnection, ids: Sequence[int]
) -> Sequence[Sequence[Any]]:
    """The statement's rows straight from asyncpg (its own prepared-statement cache; JSON is
    decoded by the codec SQLAlchemy installed): a fraction of the CPU of SQLAlchemy's
    execution and result layers, which a burst of builds waits behind.

    Any failure is left to SQLAlchemy: the statement runs again through it, which turns the
    error into a ``DBAPIError`` and invalidates a connection the server dropped (so the
    caller's one retry gets a new one).
    """
    compiled = builder.compiled(conn.dialect)
    raw = await conn.get_raw_connection()
    try:
        return await raw.driver_connection.fetch(  # type: ignore[union-attr,no-any-return]
            compiled.string, *_params(compiled, conn.dialect, ids)
        )
    except Exception:
        return await _sqlalchemy_rows(builder, conn, ids)
