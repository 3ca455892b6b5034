"""The space game's commands (``POST /api/sg/...``), each one transaction (``gameapi.Tx``).

Every command checks ownership, the rules and the stock; it spends with one
conditional statement (never more than the planet has, even under concurrent
requests) and schedules the event that finishes it. A refusal raises a
``SpaceRuleError``: the web tier answers its code and rolls everything back.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from sqlalchemy import insert, select, update

import gameapi
from examples.spacegame import economy, ships, state, travel
from examples.spacegame.battle import new_seed
from examples.spacegame.errors import (
    InvalidFleet,
    NotEnough,
    NotRecallable,
    QueueBusy,
    UnknownTarget,
)
from examples.spacegame.models import Fleet, Order

BUILD_DONE = "sg.build_done"
RESEARCH_DONE = "sg.research_done"
SHIPS_DONE = "sg.ships_done"
FLEET_ARRIVE = "sg.fleet_arrive"
FLEET_RETURN = "sg.fleet_return"

Name = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z_]+$")]
Amount = Annotated[int, Field(ge=0, le=10**12)]
Count = Annotated[int, Field(ge=0, le=ships.MAX_FLEET)]


class BuildBody(gameapi.StrictBody):
    planet_id: gameapi.Id
    building: Name


class ResearchBody(gameapi.StrictBody):
    planet_id: gameapi.Id  # the planet whose research lab works on it
    research: Name


class ShipyardBody(gameapi.StrictBody):
    planet_id: gameapi.Id
    ship: Name
    count: Annotated[int, Field(ge=1, le=ships.MAX_ORDER)]


class Cargo(gameapi.StrictBody):
    metal: Amount = 0
    crystal: Amount = 0
    deuterium: Amount = 0


class SendBody(gameapi.StrictBody):
    planet_id: gameapi.Id
    target_id: gameapi.Id
    mission: Literal["transport", "attack"]
    ships: Annotated[
        dict[Name, Annotated[int, Field(ge=0, le=ships.MAX_FLEET)]], Field(max_length=8)
    ]
    cargo: Cargo = Cargo()
    speed_pct: Literal[10, 20, 30, 40, 50, 60, 70, 80, 90, 100] = 100


class RecallBody(gameapi.StrictBody):
    fleet_id: gameapi.Id


async def _spend(tx: gameapi.Tx, place_id: int, cost: dict[str, int]) -> None:
    at = await tx.stocks.settle_horizon(tx.session, tx.now_ms)
    if await tx.stocks.spend(tx.session, place_id, state.fixed(cost), at) is None:
        raise NotEnough("not enough resources on the planet", cost=cost)


async def _queue(
    tx: gameapi.Tx,
    queue: str,
    slot: str,
    place_id: int,
    item: str,
    amount: int,
    done_ms: int,
    kind: str,
) -> dict[str, Any]:
    """Occupy the queue's slot with an order finished by an event at ``done_ms``.

    Called after the spend: its UPDATE locks the planet's stock row, so a concurrent
    order for the same planet waits for this one's commit and then sees the slot
    taken. The unique ``slot`` is the backstop (research is per player: two planets
    racing for it would fail one command with the constraint instead).
    """
    busy = await tx.session.execute(select(Order.id).where(Order.slot == slot))
    if busy.first() is not None:
        raise QueueBusy(f"the {queue} queue is busy")
    event_id = tx.schedule(kind, place_id, done_ms)
    await tx.session.execute(
        insert(Order).values(
            slot=slot,
            queue=queue,
            place_id=place_id,
            player_id=tx.player_id,
            item=item,
            amount=amount,
            started_ms=tx.now_ms,
            done_ms=done_ms,
            event_id=event_id,
        )
    )
    return {"queue": queue, "item": item, "amount": amount, "done_ms": done_ms}


async def build(tx: gameapi.Tx, player_id: int, body: BuildBody) -> dict[str, Any]:
    await gameapi.own_place(tx, body.planet_id)
    spec = economy.building(body.building)
    levels = await state.levels(tx.session, body.planet_id)
    economy.check_requirements(spec.requires, levels, await state.techs(tx.session, player_id))
    level = levels.get(spec.name, 0) + 1
    cost = spec.cost(level)
    duration = economy.build_time_ms(cost, levels.get("robotics_factory", 0), tx.world_speed)
    await _spend(tx, body.planet_id, cost)
    return await _queue(
        tx, "build", f"build:{body.planet_id}", body.planet_id, spec.name, level,
        tx.now_ms + duration, BUILD_DONE,
    )  # fmt: skip


async def research(tx: gameapi.Tx, player_id: int, body: ResearchBody) -> dict[str, Any]:
    await gameapi.own_place(tx, body.planet_id)
    spec = economy.research(body.research)
    levels = await state.levels(tx.session, body.planet_id)
    techs = await state.techs(tx.session, player_id)
    economy.check_requirements(spec.requires, levels, techs)
    level = techs.get(spec.name, 0) + 1
    cost = spec.cost(level)
    duration = economy.research_time_ms(cost, levels.get("research_lab", 0), tx.world_speed)
    await _spend(tx, body.planet_id, cost)
    return await _queue(
        tx, "research", f"research:{player_id}", body.planet_id, spec.name, level,
        tx.now_ms + duration, RESEARCH_DONE,
    )  # fmt: skip


async def shipyard(tx: gameapi.Tx, player_id: int, body: ShipyardBody) -> dict[str, Any]:
    await gameapi.own_place(tx, body.planet_id)
    levels = await state.levels(tx.session, body.planet_id)
    spec = ships.check_can_build(body.ship, levels, await state.techs(tx.session, player_id))
    cost = economy.times(spec.cost, body.count)
    duration = economy.ship_time_ms(spec.cost, body.count, levels["shipyard"], tx.world_speed)
    await _spend(tx, body.planet_id, cost)
    return await _queue(
        tx, "shipyard", f"shipyard:{body.planet_id}", body.planet_id, spec.name, body.count,
        tx.now_ms + duration, SHIPS_DONE,
    )  # fmt: skip


async def send_fleet(tx: gameapi.Tx, player_id: int, body: SendBody) -> dict[str, Any]:
    await gameapi.own_place(tx, body.planet_id)
    places = gameapi.places.c
    target = (
        await tx.session.execute(
            select(places.player_id, places.x, places.y).where(places.id == body.target_id)
        )
    ).first()
    if target is None:
        raise UnknownTarget("no such planet")
    origin = (
        await tx.session.execute(select(places.x, places.y).where(places.id == body.planet_id))
    ).one()
    fleet = ships.validate_fleet(body.ships)
    cargo = body.cargo.model_dump()
    if body.mission == "attack":
        if target.player_id == player_id:
            raise InvalidFleet("you cannot attack your own planet")
        if any(cargo.values()):
            raise InvalidFleet("an attack carries no cargo")
    if ships.total_resources(cargo) > ships.cargo_capacity(fleet):
        raise InvalidFleet("the cargo does not fit", capacity=ships.cargo_capacity(fleet))
    dist = travel.distance((origin.x, origin.y), (target.x, target.y))
    techs = await state.techs(tx.session, player_id)
    speed = ships.fleet_speed(fleet, techs.get("combustion_drive", 0))
    duration = travel.flight_ms(dist, speed, body.speed_pct, tx.world_speed)
    fuel = travel.fuel(fleet, dist, body.speed_pct)
    if not await state.take_ships(tx.session, body.planet_id, fleet):
        raise NotEnough("not enough ships on the planet")
    await _spend(tx, body.planet_id, {**cargo, "deuterium": cargo["deuterium"] + fuel})
    arrive = tx.now_ms + duration
    event_id = tx.schedule(FLEET_ARRIVE, body.target_id, arrive)
    fleet_id = (
        await tx.session.execute(
            insert(Fleet)
            .values(
                owner_id=player_id,
                origin_id=body.planet_id,
                target_id=body.target_id,
                mission=body.mission,
                state="out",
                ships=fleet,
                speed_pct=body.speed_pct,
                depart_ms=tx.now_ms,
                arrive_ms=arrive,
                event_id=event_id,
                seed=new_seed(),
                **cargo,
            )
            .returning(Fleet.id)
        )
    ).scalar_one()
    tx.touch_players([target.player_id])  # the target sees the incoming fleet
    return {"fleet_id": fleet_id, "arrive_ms": arrive, "fuel": fuel, "distance": dist}


async def recall(tx: gameapi.Tx, player_id: int, body: RecallBody) -> dict[str, Any]:
    found = (
        await tx.session.execute(
            select(Fleet).where(Fleet.id == body.fleet_id, Fleet.owner_id == player_id)
        )
    ).scalar_one_or_none()
    if found is None:
        raise UnknownTarget("no such fleet of yours")
    if found.state != "out" or not await tx.cancel(found.event_id):
        raise NotRecallable("the fleet is not on its way out")
    leg = travel.recall(found.depart_ms, found.arrive_ms, tx.now_ms)
    event_id = tx.schedule(FLEET_RETURN, found.origin_id, leg.arrive_ms)
    await tx.session.execute(
        update(Fleet)
        .where(Fleet.id == found.id)
        .values(state="back", depart_ms=leg.depart_ms, arrive_ms=leg.arrive_ms, event_id=event_id)
    )
    if found.target_id is not None:
        tx.touch_players([await state.owner_of(tx.session, found.target_id)])
    return {"fleet_id": found.id, "arrive_ms": leg.arrive_ms}


ROUTES: tuple[gameapi.CommandRoute[Any], ...] = (
    gameapi.CommandRoute("sg/build", BuildBody, build, summary="Raise a building by one level"),
    gameapi.CommandRoute(
        "sg/research", ResearchBody, research, summary="Research the next level of a technology"
    ),
    gameapi.CommandRoute("sg/shipyard", ShipyardBody, shipyard, summary="Build ships"),
    gameapi.CommandRoute(
        "sg/fleet/send", SendBody, send_fleet, summary="Send a fleet (transport or attack)"
    ),
    gameapi.CommandRoute(
        "sg/fleet/recall", RecallBody, recall, summary="Turn an outbound fleet around"
    ),
)
