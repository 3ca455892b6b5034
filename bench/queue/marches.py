"""The game run's data: a world's villages send attacks, written as a command would."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from bench.queue.constants import SCHEDULE_CALL
from bench.queue.runner import Recorder
from common.errors import FatalError

GAME_BYTES_PER_VILLAGE = 3_000  # player, village, stock, 13 buildings, troops, with indexes
GAME_BYTES_PER_EVENT = 4_000  # march, event row, processed row, two reports, the return


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


async def make_marches(
    engine: Any, queue: Any, first: int, villages: int, events: int, due_ms: int | None = None
) -> None:
    """``events`` attacks due at ``due_ms`` (default now): village i sends its army, split in
    equal marches, to others.

    Each village keeps what does not divide evenly at home, so every target has a
    few defenders: battles with losses on both sides, loot, reports, a return march.
    Marches and their events are written as a command would (database march ids,
    one durable event each), in transactions of 10,000.
    """
    from sqlalchemy import case, insert, literal, update
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue import NewEvent
    from common.queue.durable import add_durable_events
    from refgame.handlers import MARCH
    from refgame.models import March, Troop
    from refgame.world import STARTING_TROOPS

    per_village = math.ceil(events / villages)
    share = {u: n // per_village for u, n in STARTING_TROOPS.items() if n // per_village > 0}
    if not share:
        raise FatalError(
            f"{events:,} marches from {villages:,} villages is {per_village} per village, more "
            f"than a village's army can be split in; use more --villages"
        )
    now = int(time.time() * 1000) if due_ms is None else due_ms
    extra = events % villages  # villages below first + extra send one more march
    async with engine.begin() as conn:
        sends = (
            literal(per_village)
            if extra == 0
            else case((Troop.village_id < first + extra, per_village), else_=per_village - 1)
        )
        for unit, n in share.items():
            await conn.execute(
                update(Troop)
                .where(Troop.unit == unit, Troop.village_id == Troop.home_village_id)
                .values(count=Troop.count - sends * n)
            )
    for start in range(0, events, SCHEDULE_CALL):
        rows, targets = [], []
        for i in range(start, min(events, start + SCHEDULE_CALL)):
            origin = first + i % villages
            hop = 1 + (i // villages) * 7 % (villages - 1)  # a different target per march
            target = first + (origin - first + hop) % villages
            targets.append(target)
            rows.append(
                {"kind": "attack", "origin_village_id": origin, "target_village_id": target,
                 "troops": dict(share), "loot": {}, "depart_ms": now - 60_000,
                 "arrive_ms": now, "event_id": 0}
            )  # fmt: skip
        event_ids = queue.ids.next_ids(len(rows))
        for row, event_id in zip(rows, event_ids, strict=True):
            row["event_id"] = event_id
        async with AsyncSession(engine) as session, session.begin():
            found = await session.execute(
                insert(March).returning(March.id, sort_by_parameter_order=True), rows
            )
            march_ids = list(found.scalars())
            news = [
                NewEvent(MARCH, target, now, {"march_id": march_id}, id=event_id)
                for target, march_id, event_id in zip(targets, march_ids, event_ids, strict=True)
            ]
            written = await add_durable_events(session, news, ids=queue.ids)
        await queue.index(written)
