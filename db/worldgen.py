"""World generator: N players with villages on a square map, by bulk inserts.

The framework knows only the shape of a new place (``gameapi.PlaceTemplate``: its
stock, rates, caps and the game's own rows); the game supplies one (the reference
game's is ``refgame.world.village_template``) and its ``Stocks``.
PostgreSQL rows go in with COPY, SQLite rows with multi-row executemany.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from common.clock import SYSTEM_CLOCK, Clock
from common.names import name_key
from db.models import Player, Village

if TYPE_CHECKING:
    from db.declare import PlaceTemplate
    from db.stock import Stocks

_COPY_CHUNK = 50_000


@dataclass(frozen=True)
class WorldSummary:
    players: int
    villages: int
    first_village_id: int
    last_village_id: int


def stock_row(
    stocks: Stocks, village_id: int, shard: int, now_ms: int, t: PlaceTemplate
) -> dict[str, Any]:
    """The ``village_stock`` row of a new place made from ``t``."""
    return stocks.row(village_id, shard, now_ms, t.stock, t.rates, t.caps)


def game_rows(t: PlaceTemplate, place_ids: Sequence[int]) -> dict[Table, list[dict[str, Any]]]:
    """The game's own rows of new places (``t.rows``), by table, in the order the game gives."""
    out: dict[Table, list[dict[str, Any]]] = {}
    if t.rows is None:
        return out
    for place_id in place_ids:
        for table, rows in t.rows(place_id).items():
            out.setdefault(table, []).extend(rows)
    return out


async def bulk_insert(conn: AsyncConnection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many rows fast: COPY on PostgreSQL, executemany elsewhere."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        raw = await conn.get_raw_connection()
        columns = list(rows[0])
        for start in range(0, len(rows), _COPY_CHUNK):
            records = [tuple(r[c] for c in columns) for r in rows[start : start + _COPY_CHUNK]]
            await raw.driver_connection.copy_records_to_table(  # type: ignore[union-attr]
                table.name, records=records, columns=columns
            )
        return
    for start in range(0, len(rows), _COPY_CHUNK):
        await conn.execute(insert(table), list(rows[start : start + _COPY_CHUNK]))


def free_coordinates(
    taken: set[tuple[int, int]], count: int, radius: int, rng: random.Random
) -> list[tuple[int, int]]:
    side = 2 * radius + 1
    if len(taken) + count > side * side:
        raise ValueError(
            f"the map holds {side * side} villages ({len(taken)} taken); "
            f"{count} more do not fit: raise MAP_RADIUS"
        )
    out: list[tuple[int, int]] = []
    while len(out) < count:
        xy = (rng.randint(-radius, radius), rng.randint(-radius, radius))
        if xy not in taken:
            taken.add(xy)
            out.append(xy)
    return out


NEIGHBOUR_FIELDS = 2  # a new player's place is this close to the last one's when it can be


def spots_near(
    anchor: tuple[int, int], taken: set[tuple[int, int]], reach: int, radius: int
) -> list[tuple[int, int]]:
    """The free map spots within ``reach`` fields (per axis) of ``anchor``, best first.

    Best: within ``NEIGHBOUR_FIELDS`` of the anchor and nearest to the centre (0, 0);
    then the rest, nearest to the anchor first. Placing each new player at the best
    spot beside the last one fills a disc around the centre that grows ring by ring as
    players arrive (as Travian does): players who join together are neighbours.
    """
    ax, ay = anchor

    def rank(p: tuple[int, int]) -> tuple[int, int, int, tuple[int, int]]:
        to_anchor = (p[0] - ax) ** 2 + (p[1] - ay) ** 2
        to_centre = p[0] ** 2 + p[1] ** 2
        beside = to_anchor <= NEIGHBOUR_FIELDS**2
        return (0 if beside else to_anchor, to_centre, to_anchor, p)

    spots = [
        (x, y)
        for x in range(max(-radius, ax - reach), min(radius, ax + reach) + 1)
        for y in range(max(-radius, ay - reach), min(radius, ay + reach) + 1)
        if (x, y) not in taken
    ]
    return sorted(spots, key=rank)


async def generate_world(
    engine: AsyncEngine,
    *,
    players: int,
    template: PlaceTemplate,
    shards: int,
    map_radius: int,
    villages_per_player: int = 1,
    password_hash: str = "!",  # "!" matches no password: bots cannot log in
    name_prefix: str = "bot",
    seed: int | None = None,
    clock: Clock = SYSTEM_CLOCK,
    stocks: Stocks,
) -> WorldSummary:
    """Add ``players`` bot players, each with ``villages_per_player`` villages from ``template``
    (a place of the game whose ``stocks`` these are: ``gameapi.stocks_of(game)``)."""
    if players < 0 or villages_per_player < 1:
        raise ValueError("players must be >= 0 and villages_per_player >= 1")
    rng = random.Random(seed)
    now = clock.now_ms()
    async with engine.begin() as conn:
        first_player = int((await conn.execute(select(func.max(Player.id)))).scalar() or 0) + 1
        first_village = int((await conn.execute(select(func.max(Village.id)))).scalar() or 0) + 1
        taken = {(x, y) for x, y in await conn.execute(select(Village.x, Village.y))}
        n_villages = players * villages_per_player
        coords = free_coordinates(taken, n_villages, map_radius, rng)

        player_rows = [
            {
                "id": first_player + i,
                "name": f"{name_prefix}{first_player + i}",
                "name_key": name_key(f"{name_prefix}{first_player + i}"),
                "password_hash": password_hash,
                "created_ms": now,
                "is_bot": True,
            }
            for i in range(players)
        ]
        village_rows: list[dict[str, Any]] = []
        for i, (x, y) in enumerate(coords):
            vid = first_village + i
            village_rows.append(
                {
                    "id": vid,
                    "player_id": first_player + i // villages_per_player,
                    "name": f"Village {vid}",
                    "x": x,
                    "y": y,
                    "created_ms": now,
                }
            )
        # Rows of one shard go in together, so each shard's tick reads neighbouring pages.
        ids_by_shard = sorted(range(first_village, first_village + n_villages),
                              key=lambda v: (v % shards, v))  # fmt: skip
        stock_rows = [stock_row(stocks, v, v % shards, now, template) for v in ids_by_shard]
        await bulk_insert(conn, Player.__table__, player_rows)  # type: ignore[arg-type]
        await bulk_insert(conn, Village.__table__, village_rows)  # type: ignore[arg-type]
        await bulk_insert(conn, stocks.table, stock_rows)
        game_tables = game_rows(template, [v["id"] for v in village_rows])
        for game_table, rows in game_tables.items():
            await bulk_insert(conn, game_table, rows)
        if conn.dialect.name == "postgresql":
            # COPY with explicit ids leaves the serial sequences behind; catch them up.
            for table in ("players", "villages"):
                await conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"
                )
            # The planner sizes the tables from their statistics, which autovacuum updates
            # only later (or never, where it is off): tell it now how large the world is.
            loaded = [Player.__table__, Village.__table__, stocks.table, *game_tables]
            await conn.exec_driver_sql(
                "ANALYZE " + ", ".join(conn.dialect.identifier_preparer.format_table(t)
                                       for t in loaded)  # type: ignore[arg-type]
            )  # fmt: skip
    return WorldSummary(players, n_villages, first_village, first_village + n_villages - 1)
