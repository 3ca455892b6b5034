"""Places (villages, planets): the framework's rows a game's rules refer to, and how a game
founds one more for a player inside its transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from common.queue.tx import Tx, WorldShape
from db.models import Village
from db.worldgen import game_rows, stock_row

if TYPE_CHECKING:
    from db.declare import PlaceTemplate


class NotYourPlace(Exception):
    """A command names a place that does not exist or is another player's."""

    code = "village_not_found"
    http_status = 404


class PlaceTaken(Exception):
    """The map field already holds a place (``found_place``)."""

    code = "field_taken"
    http_status = 409


class OffMap(Exception):
    """The map field lies outside the world's map (``found_place``)."""

    code = "off_map"
    http_status = 400


# answered as 4xx by every command route (the game's own rule errors aside)
PLACE_ERRORS: tuple[type[Exception], ...] = (NotYourPlace, PlaceTaken, OffMap)


async def own_place(tx: Tx, place_id: int) -> None:
    """Raise ``NotYourPlace`` (404) unless the place exists and is the commanding player's."""
    found = await tx.session.execute(
        select(Village.id).where(Village.id == place_id, Village.player_id == tx.player_id)
    )
    if found.first() is None:
        raise NotYourPlace("no such village of yours")


def check_on_map(tx: Tx, x: int, y: int) -> None:
    """Raise ``OffMap`` (400) unless (x, y) lies on this world's map."""
    radius = _world(tx).map_radius
    if not (-radius <= x <= radius and -radius <= y <= radius):
        raise OffMap(f"the map spans -{radius}..{radius} on x and y")


async def found_place(
    tx: Tx,
    owner_id: int,
    x: int,
    y: int,
    template: PlaceTemplate,
    *,
    name: str,
    at_ms: int | None = None,
) -> int:
    """Found a place for ``owner_id`` at (x, y) in this transaction; returns its id.

    It gets its stock row (accruing from ``at_ms``, default ``tx.now_ms``: a handler run
    late passes its event's due time) in the tick shard of its id, and the game's rows of
    ``template``; the owner's snapshot version is bumped after the commit. The field's
    uniqueness is the database's: a field already taken (now, or by a transaction that
    committed first) raises ``PlaceTaken`` and writes nothing; a field off the map raises
    ``OffMap``.
    """
    check_on_map(tx, x, y)
    at = tx.now_ms if at_ms is None else at_ms
    session = tx.session
    dialect = session.get_bind().dialect.name
    upsert = pg_insert if dialect == "postgresql" else sqlite_insert
    # ON CONFLICT DO NOTHING keeps the transaction usable where a failed INSERT would abort it
    stmt = (
        upsert(Village)
        .values(player_id=owner_id, name=name[:32], x=x, y=y, created_ms=at)
        .on_conflict_do_nothing(index_elements=["x", "y"])
        .returning(Village.id)
    )
    place_id = (await session.execute(stmt)).scalar_one_or_none()
    if place_id is None:
        raise PlaceTaken(f"the field ({x}|{y}) is taken")
    stocks = tx.stocks
    shard = place_id % _world(tx).tick_shards
    await session.execute(insert(stocks.table), [stock_row(stocks, place_id, shard, at, template)])
    for table, rows in game_rows(template, [place_id]).items():
        if rows:
            await session.execute(insert(table), list(rows))
    tx.touch_players([owner_id])
    return place_id


def _world(tx: Tx) -> WorldShape:
    if tx.world is None:
        raise RuntimeError("this transaction was made without the world's shape (Tx.world)")
    return tx.world
