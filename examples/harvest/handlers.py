"""``harvest_done``: at its due time the farm's grain production rises by the event's gain."""

from __future__ import annotations

from sqlalchemy import select

from gameapi import Event, HandlerRegistry, Tx, places

HARVEST_DONE = "harvest_done"
HARVEST_S = 60  # at world speed 1


def harvest_ms(world_speed: float) -> int:
    return max(1, round(HARVEST_S * 1000 / world_speed))


async def harvest_done(tx: Tx, events: list[Event]) -> None:
    stocks = tx.stocks  # built from RESOURCES by the framework
    for event in events:  # in run order: (due_ms, priority, id)
        gain = {"grain": int(event.payload["gain"])}
        try:  # settle at the harvest's time with the old rate, then add the gain to it
            await stocks.add_rates(tx.session, event.village_id, gain, event.due_ms)
        except KeyError:  # the farm was deleted meanwhile
            continue
        owner = await tx.session.scalar(
            select(places.c.player_id).where(places.c.id == event.village_id)
        )
        tx.touch_players([owner])  # their snapshot changed


def register(registry: HandlerRegistry, settings: object) -> None:
    registry.register(HARVEST_DONE, harvest_done)
