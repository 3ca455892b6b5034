"""Cancel and reschedule, alone and racing a concurrent claim: exactly one side wins."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from common.clock import ManualClock
from common.queue import EventQueue, NewEvent, ScheduleError
from tests.conftest import TEST_REDIS_URL
from tests.queue.conftest import START_MS


@pytest.fixture
async def other_client() -> AsyncIterator[Redis]:
    """A second connection, so a cancel and a claim really are in flight together."""
    client = Redis.from_url(TEST_REDIS_URL)
    yield client
    await client.aclose()


async def test_cancel_pending_event(queue: EventQueue, clock: ManualClock) -> None:
    keep = await queue.schedule(NewEvent("k", 0, START_MS + 5))
    gone = await queue.schedule(NewEvent("k", 0, START_MS + 5))
    assert await queue.cancel(0, gone) is True
    assert await queue.cancel(0, gone) is False
    assert await queue.cancel(0, 999_999) is False
    await clock.advance(5)
    claim = await queue.claim(0)
    assert [e.id for e in claim.events] == [keep]
    assert await queue.cancel(0, keep) is False  # running now: too late


async def test_reschedule_moves_a_pending_event(queue: EventQueue, clock: ManualClock) -> None:
    a = await queue.schedule(NewEvent("k", 0, START_MS + 10))
    b = await queue.schedule(NewEvent("k", 0, START_MS + 20))
    assert await queue.reschedule(0, b, START_MS + 5) is True
    await clock.advance(6)
    claim = await queue.claim(0)
    assert [(e.id, e.due_ms) for e in claim.events] == [(b, START_MS + 5)]
    assert await queue.reschedule(0, b, START_MS + 50) is False  # in flight
    assert await queue.reschedule(0, 12345, START_MS + 50) is False
    with pytest.raises(ScheduleError):
        await queue.reschedule(0, a, START_MS * 100)
    await queue.ack(0, claim.token)
    await clock.advance(10)
    assert [e.id for e in (await queue.claim(0)).events] == [a]


@pytest.mark.parametrize("operation", ["cancel", "reschedule"])
async def test_cancel_or_reschedule_racing_a_claim(
    make_queue: Callable[..., EventQueue],
    other_client: Redis,
    clock: ManualClock,
    operation: str,
) -> None:
    claimer = make_queue(partitions=2)
    canceller = make_queue(partitions=2, client=other_client)
    rng = random.Random(11)
    wins = {"op": 0, "claim": 0}
    for round_ in range(150):
        event_id = await claimer.schedule(NewEvent("k", 1, clock.now_ms()))
        op_delay, claim_delay = rng.random() * 0.004, rng.random() * 0.004
        if rng.random() < 0.5:
            op_won, claimed = await asyncio.gather(
                _op(canceller, operation, event_id, op_delay, clock),
                _claim(claimer, claim_delay),
            )
        else:
            claimed, op_won = await asyncio.gather(
                _claim(claimer, claim_delay),
                _op(canceller, operation, event_id, op_delay, clock),
            )
        assert op_won != (event_id in claimed), f"round {round_}: both or neither won"
        wins["op" if op_won else "claim"] += 1
        if operation == "reschedule" and op_won:
            assert await canceller.cancel(1, event_id) is True  # clean up the moved event
    assert sum(wins.values()) == 150
    assert wins["op"] and wins["claim"], f"the race never went both ways: {wins}"


async def _op(
    queue: EventQueue, operation: str, event_id: int, delay: float, clock: ManualClock
) -> bool:
    await asyncio.sleep(delay)  # vary who reaches Redis first
    if operation == "cancel":
        return await queue.cancel(1, event_id)
    return await queue.reschedule(1, event_id, clock.now_ms() + 3_600_000)


async def _claim(queue: EventQueue, delay: float) -> list[int]:
    await asyncio.sleep(delay)
    claim = await queue.claim(1)
    if claim.token:
        await queue.ack(1, claim.token)
    return [e.id for e in claim.events]
