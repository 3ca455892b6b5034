"""The lookahead barrier: with ``registry.set_lookahead(L)`` no durable event runs more than
L ms after the earliest pending one, so a late partition's follow-ups are never due before
what already ran elsewhere; held events keep their due time (game time)."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from db.models import ScheduledEvent
from gameserver.metrics import QueueMetrics
from tests.queue.conftest import START_MS, Workers, eventually, settle

KIND = "arrive"


async def test_an_event_waits_for_an_earlier_one_beyond_the_lookahead(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    seen: list[tuple[int, int]] = []  # (event id, due_ms the handler saw)

    async def record(ctx: Tx, events: list[Event]) -> None:
        seen.extend((e.id, e.due_ms) for e in events)

    registry = HandlerRegistry()
    registry.register(KIND, record)
    registry.set_lookahead(1_000)
    async with sessions() as session, session.begin():
        # partition 1 has no worker: its event stays pending, like a paused task server's
        stuck, near, far = await add_durable_events(
            session,
            [NewEvent(KIND, 1, START_MS), NewEvent(KIND, 0, START_MS + 900),
             NewEvent(KIND, 0, START_MS + 5_000)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index([stuck, near, far])
    workers.start(queue, registry, 0, sessions=sessions)
    await clock.advance(6_000)
    await eventually(lambda: _ran(seen, 1))
    for _ in range(5):  # claimed again every HOLD_RETRY_MS, held back each time
        await clock.advance(100)
        await settle(clock)
    assert seen == [(near.id, START_MS + 900)]  # within the lookahead of the pending one

    async with sessions() as session, session.begin():  # the earlier event has run
        await session.execute(delete(ScheduledEvent).where(ScheduledEvent.id == stuck.id))
    await clock.advance(100)
    await eventually(lambda: _ran(seen, 2))
    assert seen[1] == (far.id, START_MS + 5_000)  # its game time did not move


@pytest.mark.parametrize("state", [{"attempts": 1}, {"attempts": 5, "dead_ms": START_MS}])
async def test_a_failing_or_dead_event_holds_no_other_village_back(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
    state: dict[str, int],
) -> None:
    """An event that failed (waiting for a retry) or died holds only its own village, or
    nothing (``db.events``): a bug in one handler does not stop the world."""
    seen: list[int] = []

    async def record(ctx: Tx, events: list[Event]) -> None:
        seen.extend(e.id for e in events)

    registry = HandlerRegistry()
    registry.register(KIND, record)
    registry.set_lookahead(1_000)
    async with sessions() as session, session.begin():
        bad, later = await add_durable_events(
            session,
            [NewEvent(KIND, 1, START_MS), NewEvent(KIND, 0, START_MS + 5_000)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
        await session.execute(
            update(ScheduledEvent).where(ScheduledEvent.id == bad.id).values(**state)
        )
    await queue.index([later])
    workers.start(queue, registry, 0, sessions=sessions)
    await clock.advance(6_000)
    await eventually(lambda: _ran(seen, 1))
    assert seen == [later.id]


async def _ran(seen: list, n: int) -> bool:  # type: ignore[type-arg]
    return len(seen) >= n


def test_held_back_events_are_counted_in_the_task_servers_registry() -> None:
    metrics = QueueMetrics()
    metrics.held_back.labels("0").inc(3)
    served = generate_latest(metrics.registry).decode()
    assert 'gameserver_queue_held_back_total{partition="0"} 3.0' in served
