"""Bugs the chaos run found, each pinned by a test that failed before its fix."""

from __future__ import annotations

from common.clock import ManualClock
from gameserver.queue import Event, EventQueue, NewEvent
from gameserver.queue.handlers import HandlerContext, HandlerRegistry
from tests.queue.conftest import START_MS, Workers, eventually


async def test_a_retried_event_keeps_its_due_time(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    """Found when PostgreSQL restarted: march arrivals and news of losses that failed once
    ran with ``due_ms`` moved to their retry time, so battles happened (and production
    changed) a second late in game time. A retry may delay the run, never the game time."""
    seen: list[tuple[int, int]] = []  # (due_ms the handler saw, attempts)

    async def flaky(ctx: HandlerContext, events: list[Event]) -> None:
        for e in events:
            seen.append((e.due_ms, e.attempts))
            if e.attempts == 0:
                raise ConnectionError("the database is restarting")

    registry = HandlerRegistry()
    registry.register("k", flaky, durable=False)
    await queue.schedule(NewEvent("k", 0, START_MS))
    workers.start(queue, registry, 0)
    await eventually(lambda: _count(seen, 1))
    await clock.advance(1_000)  # the first backoff
    await eventually(lambda: _count(seen, 2))
    assert seen == [(START_MS, 0), (START_MS, 1)]


async def _count(items: list[tuple[int, int]], n: int) -> bool:
    return len(items) >= n
