"""The space game's event handlers: orders finish, fleets arrive and come home.

Each handler finds its rows by the event id (orders and fleets store the id of
the event that finishes them), so a row whose event was cancelled or replaced
is never touched twice. Changes happen at the event's due time, not when the
worker runs it: production, battles and deliveries stay exact under lag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update

import gameapi
from examples.spacegame import state, travel
from examples.spacegame.battle import Side, attack_loot, fight
from examples.spacegame.commands import (
    BUILD_DONE,
    FLEET_ARRIVE,
    FLEET_RETURN,
    RESEARCH_DONE,
    SHIPS_DONE,
)
from examples.spacegame.economy import RESOURCES
from examples.spacegame.models import Building, Fleet, Order, Report

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession


async def _orders(tx: gameapi.Tx, events: list[gameapi.Event]) -> list[Order]:
    due = {e.id: e.due_ms for e in events}
    rows = await tx.session.execute(
        select(Order).where(Order.event_id.in_(list(due))).order_by(Order.done_ms, Order.id)
    )
    found = list(rows.scalars())
    if found:
        await tx.session.execute(delete(Order).where(Order.id.in_([o.id for o in found])))
    tx.touch_players(o.player_id for o in found)
    return found


async def on_build_done(tx: gameapi.Tx, events: list[gameapi.Event]) -> None:
    for order in await _orders(tx, events):
        await tx.session.execute(
            update(Building)
            .where(Building.place_id == order.place_id, Building.name == order.item)
            .values(level=order.amount)
        )
        await state.apply_production(tx, [order.place_id], order.done_ms)


async def on_research_done(tx: gameapi.Tx, events: list[gameapi.Event]) -> None:
    for order in await _orders(tx, events):
        await state.raise_research(tx.session, order.player_id, order.item, order.amount)


async def on_ships_done(tx: gameapi.Tx, events: list[gameapi.Event]) -> None:
    for order in await _orders(tx, events):
        await state.add_ships(tx.session, order.place_id, {order.item: order.amount})


async def _fleets(tx: gameapi.Tx, events: list[gameapi.Event], fleet_state: str) -> list[Fleet]:
    rows = await tx.session.execute(
        select(Fleet)
        .where(Fleet.event_id.in_([e.id for e in events]), Fleet.state == fleet_state)
        .order_by(Fleet.arrive_ms, Fleet.id)
    )
    return list(rows.scalars())


def _cargo(fleet: Fleet) -> dict[str, int]:
    return {"metal": fleet.metal, "crystal": fleet.crystal, "deuterium": fleet.deuterium}


async def _report(
    session: AsyncSession, player_ids: list[int | None], kind: str, at_ms: int, body: dict[str, Any]
) -> None:
    rows = [
        {"player_id": p, "kind": kind, "created_ms": at_ms, "body": body}
        for p in dict.fromkeys(player_ids)
        if p is not None
    ]
    if rows:
        await session.execute(insert(Report), rows)


async def _send_home(
    tx: gameapi.Tx, fleet: Fleet, ships: dict[str, int], cargo: dict[str, int]
) -> None:
    leg = travel.way_home(fleet.depart_ms, fleet.arrive_ms)
    event_id = tx.schedule(FLEET_RETURN, fleet.origin_id, leg.arrive_ms)
    await tx.session.execute(
        update(Fleet)
        .where(Fleet.id == fleet.id)
        .values(
            state="back",
            ships=ships,
            depart_ms=leg.depart_ms,
            arrive_ms=leg.arrive_ms,
            event_id=event_id,
            **cargo,
        )
    )


async def _transport(tx: gameapi.Tx, fleet: Fleet, target_id: int, owner: int | None) -> None:
    cargo = _cargo(fleet)
    # storage caps the delivery: what does not fit is lost, as in a full OGame storage
    await tx.stocks.deposit(tx.session, target_id, state.fixed(cargo), fleet.arrive_ms)
    body = {"origin_id": fleet.origin_id, "target_id": target_id, "cargo": cargo}
    await _report(tx.session, [fleet.owner_id, owner], "transport", fleet.arrive_ms, body)
    await _send_home(tx, fleet, dict(fleet.ships), dict.fromkeys(RESOURCES, 0))


async def _attack(tx: gameapi.Tx, fleet: Fleet, target_id: int, owner: int | None) -> None:
    session, at = tx.session, fleet.arrive_ms
    attacker = Side(dict(fleet.ships), **_combat_techs(await state.techs(session, fleet.owner_id)))
    defender = Side(
        await state.ships(session, target_id), **_combat_techs(await state.techs(session, owner))
    )
    outcome = fight(attacker, defender, fleet.seed)
    lost = outcome.losses(defender, outcome.defender_left)
    if lost and not await state.take_ships(session, target_id, lost):
        raise RuntimeError("defending ships changed during the battle's transaction")
    stock = await state.stock_units(tx, target_id, at)
    loot = attack_loot(outcome, stock)
    if any(loot.values()):
        spent = await tx.stocks.spend(session, target_id, state.fixed(loot), at)
        if spent is None:
            raise RuntimeError("loot exceeds the settled stock it was computed from")
    body = {
        "origin_id": fleet.origin_id,
        "target_id": target_id,
        "seed": fleet.seed,
        "attacker": attacker.to_dict(),
        "defender": defender.to_dict(),
        "defender_stock": stock,  # before the loot: with the seed, the report replays
        "winner": outcome.winner,
        "rounds": outcome.rounds,
        "attacker_losses": outcome.losses(attacker, outcome.attacker_left),
        "defender_losses": lost,
        "loot": loot,
    }
    await _report(session, [fleet.owner_id, owner], "battle", at, body)
    if outcome.attacker_left:
        await _send_home(tx, fleet, outcome.attacker_left, loot)
    else:
        await session.execute(delete(Fleet).where(Fleet.id == fleet.id))


def _combat_techs(techs: dict[str, int]) -> dict[str, int]:
    return {
        "weapons": techs.get("weapons_tech", 0),
        "shielding": techs.get("shielding_tech", 0),
        "armour": techs.get("armour_tech", 0),
    }


async def on_fleet_arrive(tx: gameapi.Tx, events: list[gameapi.Event]) -> None:
    for fleet in await _fleets(tx, events, "out"):
        target_id = fleet.target_id
        owner = None if target_id is None else await state.owner_of(tx.session, target_id)
        if target_id is None:  # the planet is gone: turn around with the cargo
            await _send_home(tx, fleet, dict(fleet.ships), _cargo(fleet))
        elif fleet.mission == "attack":
            await _attack(tx, fleet, target_id, owner)
        else:
            await _transport(tx, fleet, target_id, owner)
        tx.touch_players([fleet.owner_id, owner])


async def on_fleet_return(tx: gameapi.Tx, events: list[gameapi.Event]) -> None:
    for fleet in await _fleets(tx, events, "back"):
        await state.add_ships(tx.session, fleet.origin_id, fleet.ships)
        cargo = _cargo(fleet)
        if any(cargo.values()):
            await tx.stocks.deposit(
                tx.session, fleet.origin_id, state.fixed(cargo), fleet.arrive_ms
            )
        await tx.session.execute(delete(Fleet).where(Fleet.id == fleet.id))
        tx.touch_players([fleet.owner_id])


def register_handlers(registry: gameapi.HandlerRegistry, _settings: object) -> None:
    registry.register(BUILD_DONE, on_build_done)
    registry.register(RESEARCH_DONE, on_research_done)
    registry.register(SHIPS_DONE, on_ships_done)
    registry.register(FLEET_ARRIVE, on_fleet_arrive)
    registry.register(FLEET_RETURN, on_fleet_return)
