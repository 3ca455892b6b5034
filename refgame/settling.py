"""A second village: settlers march to a free field and found a village there.

``POST /api/found`` sends ``SETTLERS_TO_FOUND`` settlers from a village of the
player to a free field on the map; they travel like a march (their speed,
``travel.march_duration_ms``) and are no longer home. At the arrival (event
``found``, scheduled in the origin village, so it runs in that village's order):

- the field is still free: a village is founded there for the origin's owner
  from the new player's template (``world.player_village_template``), its stock
  accruing from the due time; the settlers are used up, so the origin's upkeep
  falls at that time; a ``settling`` report says so;
- the field was taken meanwhile: the settlers walk home (a ``return`` march,
  as long as they came) and a ``settling`` report says so;
- the origin village is gone: the settlers scatter.

Founding costs no resources beyond the settlers (they are costly enough). An
operator dropping a dead ``found`` event brings the settlers home at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field
from sqlalchemy import delete, insert, update

from gameapi import CommandRoute, Event, HandlerRegistry, Id, Out, PlaceTemplate, StrictBody, Tx
from gameapi.places import OffMap, PlaceTaken, check_on_map, found_place
from refgame import state
from refgame.commands import Coordinate, own_village
from refgame.errors import InsufficientTroops
from refgame.handlers import MARCH
from refgame.models import March, SettleMarch
from refgame.travel import march_duration_ms
from refgame.units import total_upkeep

FOUND = "found"
SETTLER = "settler"
SETTLERS_TO_FOUND = 3  # settlers a new village takes (all used up)
REPORT_KIND = "settling"


async def found(tx: Tx, player_id: int, village_id: int, x: int, y: int) -> dict[str, Any]:
    """Send settlers from ``village_id`` to found a village at (x, y)."""
    origin = await own_village(tx, player_id, village_id)
    check_on_map(tx, x, y)
    if await state.village_at(tx.session, x, y) is not None:
        raise PlaceTaken(f"the field ({x}|{y}) holds a village")
    settlers = {SETTLER: SETTLERS_TO_FOUND}
    if not await state.take_troops(tx.session, village_id, village_id, settlers):
        home = (await state.troops_home(tx.session, village_id)).get(SETTLER, 0)
        raise InsufficientTroops(
            f"founding a village takes {SETTLERS_TO_FOUND} settlers at home; there are {home}",
            wanted=settlers,
            available={SETTLER: home},
        )
    depart = tx.now_ms
    arrive = depart + march_duration_ms((origin.x, origin.y), (x, y), settlers, tx.world_speed)
    settle_id = (
        await tx.session.execute(
            insert(SettleMarch)
            .values(origin_village_id=origin.id, x=x, y=y, settlers=SETTLERS_TO_FOUND,
                    depart_ms=depart, arrive_ms=arrive, event_id=0)
            .returning(SettleMarch.id)
        )
    ).scalar_one()  # fmt: skip
    event_id = tx.schedule(FOUND, origin.id, arrive, {"settle_id": settle_id})
    await tx.session.execute(
        update(SettleMarch).where(SettleMarch.id == settle_id).values(event_id=event_id)
    )
    tx.touch_players([player_id])
    return {"settle_id": settle_id, "x": x, "y": y, "settlers": SETTLERS_TO_FOUND,
            "depart_ms": depart, "arrive_ms": arrive}  # fmt: skip


NewVillage = Callable[[float], PlaceTemplate]  # world speed -> a new village's template


async def arrive(
    tx: Tx, origin_id: int, due_ms: int, payload: Mapping[str, Any], new_village: NewVillage
) -> None:
    """The settlers reach their field at ``due_ms``: found the village, or turn back."""
    row = await tx.session.get(SettleMarch, int(payload["settle_id"]))
    if row is None:
        return
    await tx.session.execute(delete(SettleMarch).where(SettleMarch.id == row.id))
    origin = await state.village_info(tx.session, origin_id)
    if origin is None or origin.player_id is None:
        return  # the home village is gone: the settlers scatter
    settlers = {SETTLER: row.settlers}
    field = {"x": row.x, "y": row.y}
    home = {"village_id": origin.id, "name": origin.name, "x": origin.x, "y": origin.y}
    try:
        new_id = await found_place(
            tx, origin.player_id, row.x, row.y, new_village(tx.world_speed),
            name=f"Village {row.x}|{row.y}", at_ms=due_ms,
        )  # fmt: skip
    except (PlaceTaken, OffMap):
        back = due_ms + (due_ms - row.depart_ms)
        occupant = await state.village_at(tx.session, row.x, row.y)
        await _walk_home(tx, row, origin.id, occupant.id if occupant else origin.id, back, due_ms)
        body = {"type": "settling", "founded": False, "time_ms": due_ms, "field": field,
                "origin": home, "settlers": settlers, "return_ms": back}  # fmt: skip
        title = f"The field ({row.x}|{row.y}) was taken; the settlers return"
        await state.add_report(tx.session, origin.player_id, REPORT_KIND, title, body, due_ms)
        tx.touch_players([origin.player_id])
        return
    # the settlers stay in their village for good: their home no longer feeds them
    await state.change_rates(tx.session, origin.id, due_ms, tx, {"crop": total_upkeep(settlers)})
    body = {"type": "settling", "founded": True, "time_ms": due_ms, "field": field,
            "origin": home, "settlers": settlers, "village_id": new_id}  # fmt: skip
    title = f"A new village at ({row.x}|{row.y})"
    await state.add_report(tx.session, origin.player_id, REPORT_KIND, title, body, due_ms)


async def _walk_home(
    tx: Tx, row: SettleMarch, origin_id: int, target_id: int, back_ms: int, due_ms: int
) -> None:
    """A ``return`` march brings the settlers home (``handlers.march`` adds them there)."""
    march_id = (
        await tx.session.execute(
            insert(March)
            .values(kind="return", origin_village_id=origin_id, target_village_id=target_id,
                    troops={SETTLER: row.settlers}, loot={}, depart_ms=due_ms,
                    arrive_ms=back_ms, event_id=0)
            .returning(March.id)
        )
    ).scalar_one()  # fmt: skip
    event_id = tx.schedule(MARCH, origin_id, back_ms, {"march_id": march_id})
    await tx.session.execute(update(March).where(March.id == march_id).values(event_id=event_id))


async def drop_found(
    tx: Tx, origin_id: int, due_ms: int, payload: Mapping[str, Any], event_id: int
) -> None:
    """An operator dropped a dead ``found``: the settlers are home at once (their home fed
    them while away, so its upkeep does not change)."""
    row = await tx.session.get(SettleMarch, int(payload.get("settle_id", 0)))
    if row is None or row.event_id != event_id:
        return
    await tx.session.execute(delete(SettleMarch).where(SettleMarch.id == row.id))
    origin = await state.village_info(tx.session, origin_id)
    if origin is None:
        return
    await state.add_troops(tx.session, origin.id, origin.id, {SETTLER: row.settlers})
    tx.touch_players([origin.player_id])


async def _compensate(tx: Tx, events: list[Event]) -> None:
    for event in events:
        await drop_found(tx, event.village_id, event.due_ms, event.payload, event.id)


MAX_BATCH = 50  # arrivals per handler call (each founds a village: a dozen statements)


def register(registry: HandlerRegistry, new_village: NewVillage) -> None:
    """Register ``found``; a founded village is made from ``new_village(world_speed)`` (the
    game's ``world.player_village_template``: this module cannot import ``world``)."""

    async def handle(tx: Tx, events: list[Event]) -> None:
        for event in events:  # in run order: (due, priority, id)
            await arrive(tx, event.village_id, event.due_ms, event.payload, new_village)

    registry.register(FOUND, handle, max_batch=MAX_BATCH, compensate=_compensate)


# --- HTTP route: POST /api/found -----------------------------------------------------------------


class FoundBody(StrictBody):
    village_id: Id = Field(description="the village the settlers leave from")
    x: Coordinate
    y: Coordinate


class FoundOut(Out):
    settle_id: int
    x: int
    y: int
    settlers: int
    depart_ms: int
    arrive_ms: int


async def _found_route(tx: Tx, player_id: int, body: FoundBody) -> dict[str, Any]:
    return await found(tx, player_id, body.village_id, body.x, body.y)


ROUTES = [
    CommandRoute(
        "found",
        FoundBody,
        _found_route,
        "Send 3 settlers to found a village on a free field",
        FoundOut,
    ),
]
