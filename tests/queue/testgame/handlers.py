"""Handlers of the test game, loaded with ``GAME=tests.queue.testgame``."""

from __future__ import annotations

import asyncio

from sqlalchemy import insert

from common.queue.events import Event
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from tests.queue.testgame import EFFECT, MEMORY, effects


async def apply_effects(ctx: Tx, events: list[Event]) -> None:
    """Insert one effect row per event, then sleep (so a kill lands inside the transaction)."""
    await ctx.session.execute(
        insert(effects), [{"event_id": e.id, "village_id": e.village_id} for e in events]
    )
    if any(e.payload.get("fail") for e in events):
        raise RuntimeError("this event is meant to fail")
    sleep_ms = max(int(e.payload.get("sleep_ms", 0)) for e in events)
    if sleep_ms:
        await asyncio.sleep(sleep_ms / 1000)


async def nothing(ctx: Tx, events: list[Event]) -> None:
    return None


def register(registry: HandlerRegistry) -> None:
    registry.register(EFFECT, apply_effects, durable=True)
    registry.register(MEMORY, nothing, durable=False)
