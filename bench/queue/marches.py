"""The game run's data: the loaded game's ``bench`` hook schedules events as a command would."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from bench.queue.constants import SCHEDULE_CALL
from bench.queue.runner import Recorder
from common.errors import FatalError

# disk estimates sized on refgame (player, village, stock, 13 buildings, troops, with indexes;
# march, event row, processed row, two reports, the return)
GAME_BYTES_PER_VILLAGE = 3_000
GAME_BYTES_PER_EVENT = 4_000


def radius_for(villages: int) -> int:
    """A map with about twice as many spots as villages (the generator needs free spots)."""
    return max(5, math.ceil((math.sqrt(2 * villages) - 1) / 2) + 1)


def timed_registry(settings: Any, recorder: Recorder, measured: str) -> Any:
    """The task server's real registry (builtin + the game's), ``measured`` wrapped to time it."""
    from common.queue.handlers import HandlerRegistry
    from gameserver.main import game_registry

    real = game_registry(settings)
    registry = HandlerRegistry()
    for kind in real.kinds():
        reg = real.get(kind)
        assert reg is not None
        handler = recorder.wrap(reg.handler) if kind == measured else reg.handler
        registry.register(
            kind, handler, durable=reg.durable, timeout_s=reg.timeout_s, retry=reg.retry,
            max_batch=reg.max_batch,
        )  # fmt: skip
    return registry


async def add_events(engine: Any, queue: Any, events: Sequence[Any]) -> None:
    """Durable events in transactions of 10,000, indexed in Redis after each commit."""
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue.durable import add_durable_events

    for start in range(0, len(events), SCHEDULE_CALL):
        async with AsyncSession(engine) as session, session.begin():
            written = await add_durable_events(
                session, events[start : start + SCHEDULE_CALL], ids=queue.ids
            )
        await queue.index(written)


async def add_game_events(
    settings: Any, engine: Any, queue: Any, place_ids: Sequence[int], events: int, due_ms: int
) -> None:
    """The loaded game's ``bench.prepare`` writes its rows and schedules ``events`` events
    in one transaction, as a command would; the bench writes them as durable rows in
    calls of 10,000, commits, then indexes them in Redis."""
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue.durable import add_durable_events
    from gameapi.loading import load_game
    from gameapi.testing import game_tx
    from gameserver.main import game_registry

    game = load_game(settings.game)
    assert game.bench is not None  # game_bench refused the game before
    written = []
    async with AsyncSession(engine) as session, session.begin():
        tx = game_tx(
            session, int(time.time() * 1000), game, ids=queue.ids,
            world_speed=settings.world_speed, registry=game_registry(settings),
        )  # fmt: skip
        try:
            await game.bench.prepare(tx, place_ids, events, due_ms)
        except ValueError as exc:
            raise FatalError(f"{game.name}: {exc}") from None
        if len(tx.events) != events:
            raise FatalError(
                f"{game.name}'s bench.prepare scheduled {len(tx.events):,} events, not {events:,}"
            )
        for start in range(0, len(tx.events), SCHEDULE_CALL):
            chunk = tx.events[start : start + SCHEDULE_CALL]
            written += await add_durable_events(session, chunk, ids=queue.ids)
    for start in range(0, len(written), SCHEDULE_CALL):
        await queue.index(written[start : start + SCHEDULE_CALL])
