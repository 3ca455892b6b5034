"""Reading and writing a planet's state: levels, research, ships, production.

Shared by the commands and the handlers; every write is one set-based statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

import gameapi
from examples.spacegame import economy
from examples.spacegame.economy import RESOURCES
from examples.spacegame.models import Building, Planet, Research, Ships

DECLARED: tuple[gameapi.Resource, ...] = tuple(gameapi.Resource(r, cap=r) for r in RESOURCES)


def stocks() -> gameapi.Stocks:
    """The framework's stock statements for this declaration, where there is no ``tx``
    (tests, tools): the same cached object as ``tx.stocks``."""
    return gameapi.stocks_for(DECLARED)


async def levels(session: AsyncSession, place_id: int) -> dict[str, int]:
    rows = await session.execute(
        select(Building.name, Building.level).where(Building.place_id == place_id)
    )
    return {name: level for name, level in rows}


async def techs(session: AsyncSession, player_id: int | None) -> dict[str, int]:
    if player_id is None:
        return {}
    rows = await session.execute(
        select(Research.name, Research.level).where(Research.player_id == player_id)
    )
    return {name: level for name, level in rows}


async def ships(session: AsyncSession, place_id: int) -> dict[str, int]:
    rows = await session.execute(
        select(Ships.name, Ships.count).where(Ships.place_id == place_id, Ships.count > 0)
    )
    return {name: count for name, count in rows}


async def owner_of(session: AsyncSession, place_id: int) -> int | None:
    found = await session.execute(
        select(gameapi.places.c.player_id).where(gameapi.places.c.id == place_id)
    )
    return found.scalar_one_or_none()


async def stock_units(tx: gameapi.Tx, place_id: int, at_ms: int) -> dict[str, int]:
    """The planet's resources in whole units, settled at ``at_ms``."""
    st, session = tx.stocks, tx.session
    await st.settle(session, [place_id], at_ms)
    row = (
        await session.execute(
            select(*(st.c[r] for r in RESOURCES)).where(st.c.village_id == place_id)
        )
    ).one()
    return {r: gameapi.to_units(int(v)) for r, v in zip(RESOURCES, row, strict=True)}


async def take_ships(session: AsyncSession, place_id: int, fleet: Mapping[str, int]) -> bool:
    """Remove ships from the planet, each kind only if it has enough (False: nothing taken
    of that kind; the caller rolls the transaction back)."""
    for name, count in fleet.items():
        done = await session.execute(
            update(Ships)
            .where(Ships.place_id == place_id, Ships.name == name, Ships.count >= count)
            .values(count=Ships.count - count)
        )
        if done.rowcount != 1:  # type: ignore[attr-defined]
            return False
    return True


async def add_ships(session: AsyncSession, place_id: int, fleet: Mapping[str, int]) -> None:
    for name, count in fleet.items():
        if count:
            await session.execute(
                update(Ships)
                .where(Ships.place_id == place_id, Ships.name == name)
                .values(count=Ships.count + count)
            )


async def raise_research(session: AsyncSession, player_id: int, name: str, level: int) -> None:
    """Set a research level; the first level inserts the row (one research order per
    player at a time, so nothing else writes it concurrently)."""
    done = await session.execute(
        update(Research)
        .where(Research.player_id == player_id, Research.name == name)
        .values(level=level)
    )
    if done.rowcount == 0:  # type: ignore[attr-defined]
        await session.execute(insert(Research).values(player_id=player_id, name=name, level=level))


async def apply_production(tx: gameapi.Tx, place_ids: Iterable[int], at_ms: int) -> None:
    """Set each planet's rates and caps from its buildings, from ``at_ms`` on."""
    session = tx.session
    for place_id in place_ids:
        lv = await levels(session, place_id)
        temp = (
            await session.execute(select(Planet.temperature).where(Planet.place_id == place_id))
        ).scalar_one()
        await tx.stocks.set_rates(
            session,
            place_id,
            economy.production(lv, temp, tx.world_speed),
            at_ms,
            caps=economy.capacities(lv),
        )


def fixed(amounts: Mapping[str, int]) -> dict[str, int]:
    return {r: gameapi.to_fixed(amounts.get(r, 0)) for r in RESOURCES}
