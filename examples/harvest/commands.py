"""``POST /api/sow``: spend grain now; the harvest comes at its due time."""

from __future__ import annotations

from typing import Any

from examples.harvest.handlers import HARVEST_DONE, harvest_ms
from gameapi import CommandRoute, Id, StrictBody, Tx, own_place, to_fixed

SEED_COST = 50  # grain
GAIN = 20  # grain per hour the harvest adds to the farm's production


class NotEnoughGrain(Exception):
    """A rule refusal: the framework answers 409 with this code and rolls back."""

    code, http_status = "not_enough_grain", 409


class SowBody(StrictBody):
    village_id: Id


async def sow(tx: Tx, player_id: int, body: SowBody) -> dict[str, Any]:
    await own_place(tx, body.village_id)  # 404 unless it is this player's
    stocks = tx.stocks  # built from RESOURCES by the framework
    at = await stocks.settle_horizon(tx.session, tx.now_ms)
    if await stocks.spend(tx.session, body.village_id, {"grain": to_fixed(SEED_COST)}, at) is None:
        raise NotEnoughGrain(f"sowing takes {SEED_COST} grain")
    due_ms = tx.now_ms + harvest_ms(tx.world_speed)
    event_id = tx.schedule(HARVEST_DONE, body.village_id, due_ms, {"gain": GAIN})
    return {"event_id": event_id, "harvest_ms": due_ms}


ROUTES = [CommandRoute("sow", SowBody, sow, "Sow grain; the harvest raises production")]
