"""Handlers of the test game, loaded with ``GAME=tests.queue.testgame``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

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


TALLY_EVERY_S = 1.0


def tally_key(prefix: str) -> str:
    return f"{prefix}:test:tally"


async def tally(ctx: Any) -> None:
    """A one-per-world job: note who ran it and when (Redis clock), "pid:ms"."""
    seconds, micros = await ctx.redis.time()
    ms = int(seconds) * 1000 + int(micros) // 1000
    await ctx.redis.rpush(tally_key(ctx.settings.redis_prefix), f"{os.getpid()}:{ms}")


def register(registry: HandlerRegistry) -> None:
    registry.register(EFFECT, apply_effects, durable=True)
    registry.register(MEMORY, nothing, durable=False)
    registry.add_job("test.tally", tally, TALLY_EVERY_S)
