"""Player accounts: a new player and their first village, in one transaction.

The village comes from the game's ``PlaceTemplate`` and is placed on a free
spot next to the last registered player's (the first one beside the centre). Two
registrations racing for the same spot or name are settled by the unique
constraints: the loser retries on another spot, or learns that the name is taken.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import case, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from common.names import name_key
from db.models import Player, Village
from db.worldgen import NEIGHBOUR_FIELDS, game_rows, spots_near, stock_row

if TYPE_CHECKING:
    from db.declare import PlaceTemplate
    from db.stock import Stocks

_CHOICES = 3  # a new player's spot: one of this many best free spots
_ATTEMPTS = 5  # transactions retried after losing a spot race


class NameTaken(Exception):
    """Another player already has this name, or one that looks the same (``common.names``)."""


class MapFull(Exception):
    """No free spot is left on the map: raise MAP_RADIUS."""


@dataclass(frozen=True)
class NewAccount:
    player_id: int
    village_id: int
    x: int
    y: int


@dataclass(frozen=True)
class Credentials:
    player_id: int
    name: str  # as registered (a login may spell it another way)
    password_hash: str


async def find_credentials(engine: AsyncEngine, name: str) -> Credentials | None:
    """The account ``name`` or a look-alike of it names (the exact name first: players who
    shared a key before keys existed keep their own accounts)."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(Player.id, Player.name, Player.password_hash)
                .where(or_(Player.name_key == name_key(name), Player.name == name))
                .order_by(case((Player.name == name, 0), else_=1))
                .limit(1)
            )
        ).first()
    return None if row is None else Credentials(row.id, row.name, row.password_hash)


async def set_password_hash(engine: AsyncEngine, player_id: int, password_hash: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(Player).where(Player.id == player_id).values(password_hash=password_hash)
        )


async def _last_player_spot(conn: AsyncConnection, player_id: int) -> tuple[int, int]:
    """Where the last registered (not generated) player before ``player_id`` lives; the
    centre when there is none."""
    row = (
        await conn.execute(
            select(Village.x, Village.y)
            .join(Player, Player.id == Village.player_id)
            .where(Player.id < player_id, Player.is_bot.is_(False))
            .order_by(Player.id.desc(), Village.id)
            .limit(1)
        )
    ).first()
    return (0, 0) if row is None else (int(row.x), int(row.y))


async def _free_spot(
    conn: AsyncConnection, player_id: int, radius: int, rng: random.Random, attempt: int
) -> tuple[int, int]:
    """A free spot next to the last registered player (``worldgen.spots_near``).

    One of the few best beside it, at random, so registrations at the same moment seldom
    race for one spot; a retry after a lost race picks among more (``_CHOICES << attempt``).
    """
    anchor = await _last_player_spot(conn, player_id)
    ax, ay = anchor
    reach = NEIGHBOUR_FIELDS + attempt
    while True:
        found = await conn.execute(
            select(Village.x, Village.y).where(
                Village.x.between(ax - reach, ax + reach), Village.y.between(ay - reach, ay + reach)
            )
        )
        spots = spots_near(anchor, {(x, y) for x, y in found}, reach, radius)
        if spots:
            best = spots[: _CHOICES << attempt]
            beside = [p for p in best if (p[0] - ax) ** 2 + (p[1] - ay) ** 2 <= NEIGHBOUR_FIELDS**2]
            return rng.choice(beside if attempt == 0 and beside else best)
        if reach > 2 * radius:
            raise MapFull("the map has no free spot left: raise MAP_RADIUS")
        reach *= 2


async def _name_exists(engine: AsyncEngine, name: str) -> bool:
    async with engine.connect() as conn:
        found = await conn.execute(
            select(func.count()).where(or_(Player.name == name, Player.name_key == name_key(name)))
        )
        return bool(found.scalar())


async def create_account(
    engine: AsyncEngine,
    *,
    name: str,
    password_hash: str,
    template: PlaceTemplate,
    shards: int,
    map_radius: int,
    now_ms: int,
    village_name: str | None = None,
    stocks: Stocks,
    rng: random.Random | None = None,
) -> NewAccount:
    """Insert a player with one village (its stock and the game's rows from ``template``;
    ``stocks``: the game's, ``gameapi.stocks_of(game)``).

    Raises NameTaken or MapFull; nothing is written then.
    """
    rng = rng or random.Random()
    for attempt in range(_ATTEMPTS):
        try:
            async with engine.begin() as conn:
                player_id = (
                    await conn.execute(
                        insert(Player)
                        .values(
                            name=name,
                            name_key=name_key(name),
                            password_hash=password_hash,
                            created_ms=now_ms,
                        )
                        .returning(Player.id)
                    )
                ).scalar_one()
                x, y = await _free_spot(conn, player_id, map_radius, rng, attempt)
                village_id = (
                    await conn.execute(
                        insert(Village)
                        .values(
                            player_id=player_id,
                            name=village_name or f"{name}'s village"[:32],
                            x=x,
                            y=y,
                            created_ms=now_ms,
                        )
                        .returning(Village.id)
                    )
                ).scalar_one()
                await conn.execute(
                    insert(stocks.table),
                    [stock_row(stocks, village_id, village_id % shards, now_ms, template)],
                )
                for table, rows in game_rows(template, [village_id]).items():
                    if rows:
                        await conn.execute(insert(table), list(rows))
            return NewAccount(player_id, village_id, x, y)
        except IntegrityError:
            if await _name_exists(engine, name):
                raise NameTaken(f"the name {name!r} is taken") from None
            # lost a race for the spot: try again elsewhere
    raise MapFull("could not find a free spot on the map; try again or raise MAP_RADIUS")
