"""Player accounts: a new player and their first village, in one transaction.

The village comes from the game's ``PlaceTemplate`` and is placed on a free
spot of the map. Two registrations racing for the same spot or name are
settled by the unique constraints: the loser retries on another spot, or
learns that the name is taken.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import case, func, insert, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from common.names import name_key
from db.models import Player, Village
from db.worldgen import free_coordinates, game_rows, stock_row

if TYPE_CHECKING:
    from db.declare import PlaceTemplate
    from db.stock import Stocks

_CANDIDATES = 64  # random spots tried per query before scanning the whole map
_PLACEMENT_ROUNDS = 4
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


async def _free_spot(conn: AsyncConnection, radius: int, rng: random.Random) -> tuple[int, int]:
    for _ in range(_PLACEMENT_ROUNDS):
        candidates = {
            (rng.randint(-radius, radius), rng.randint(-radius, radius)) for _ in range(_CANDIDATES)
        }
        found = await conn.execute(
            select(Village.x, Village.y).where(tuple_(Village.x, Village.y).in_(list(candidates)))
        )
        taken = {(x, y) for x, y in found}
        free = sorted(candidates - taken)
        if free:
            return rng.choice(free)
    # a crowded map: look at every taken spot once
    taken_all = {(x, y) for x, y in await conn.execute(select(Village.x, Village.y))}
    try:
        return free_coordinates(taken_all, 1, radius, rng)[0]
    except ValueError as exc:
        raise MapFull(str(exc)) from None


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
    for _ in range(_ATTEMPTS):
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
                x, y = await _free_spot(conn, map_radius, rng)
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
