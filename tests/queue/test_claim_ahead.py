"""Claiming ahead (``claim_ahead_ms``): events claimed before they are due run at their due
time, never before, in run order with events scheduled after the claim; a stopping worker
hands them back."""

from __future__ import annotations

import pytest

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from gameserver.config import TaskServerConfig
from tests.queue.conftest import START_MS, Workers, at_rest, eventually, settle


class Ran:
    """A handler that records (event id, clock time) of every event it runs."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    async def __call__(self, ctx: Tx, events: list[Event]) -> None:
        self.seen.extend((e.id, ctx.now_ms) for e in events)

    def registry(self) -> HandlerRegistry:
        registry = HandlerRegistry()
        registry.register("k", self, durable=False)
        return registry

    @property
    def ids(self) -> list[int]:
        return [event_id for event_id, _ in self.seen]


async def _holding(queue: EventQueue, clock: ManualClock, n: int) -> None:
    """Wait until the worker has claimed ``n`` events ahead and sleeps until they are due."""

    async def check() -> bool:
        [s] = await queue.stats([0])
        return s.inflight == n and s.depth == 0 and clock.slept_on()

    await eventually(check)


async def test_an_event_claimed_ahead_runs_at_its_due_time_not_before(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    ran = Ran()
    offsets = (3, 7, 7, 10)
    ids = await queue.schedule_many([NewEvent("k", 0, START_MS + d) for d in offsets])
    due = dict(zip(ids, (START_MS + d for d in offsets), strict=True))
    workers.start(queue, ran.registry(), 0, claim_ahead_ms=10, min_claim_interval_ms=1)
    await _holding(queue, clock, 4)  # all four claimed at START_MS, none due yet
    assert ran.seen == []
    for _ in range(10):
        await clock.advance(1)
        await settle(clock)
        now = clock.now_ms()
        assert ran.ids == [i for i in ids if due[i] <= now]
    assert all(at == due[event_id] for event_id, at in ran.seen)
    await at_rest(queue, 0)


async def test_steps_run_late_by_at_most_the_claim_interval_never_early(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    ran = Ran()
    ids = await queue.schedule_many([NewEvent("k", 0, START_MS + d) for d in range(1, 21)])
    due = {i: START_MS + d for i, d in zip(ids, range(1, 21), strict=True)}
    workers.start(queue, ran.registry(), 0, claim_ahead_ms=20, min_claim_interval_ms=5)
    await _holding(queue, clock, 20)
    for _ in range(25):
        await clock.advance(1)
        await settle(clock)
    assert ran.ids == ids
    assert all(0 <= at - due[event_id] < 5 for event_id, at in ran.seen)
    assert len({at for _, at in ran.seen}) < 10  # in steps, not one call per ms


async def test_an_event_scheduled_before_a_batch_claimed_ahead_runs_first(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    ran = Ran()
    later = await queue.schedule_many([NewEvent("k", 0, START_MS + d) for d in (8, 9)])
    workers.start(queue, ran.registry(), 0, claim_ahead_ms=10, min_claim_interval_ms=1)
    await workers.listener.ready.wait()
    await _holding(queue, clock, 2)
    # news of earlier events wakes the worker: it hands its batch back and claims again
    earlier = await queue.schedule(NewEvent("k", 4, START_MS + 5))  # partition 0 of 4
    tie = await queue.schedule(NewEvent("k", 0, START_MS + 8, priority=-1))
    await _holding(queue, clock, 4)
    for _ in range(10):
        await clock.advance(1)
        await settle(clock)
    assert ran.ids == [earlier, tie, *later]  # (due, priority, id), nothing twice
    assert ran.seen[0][1] == START_MS + 5
    await at_rest(queue, 0)


async def test_a_stopped_worker_hands_back_what_it_claimed_ahead(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    ran = Ran()
    ids = await queue.schedule_many([NewEvent("k", 0, START_MS + d) for d in (2, 6)])
    workers.start(queue, ran.registry(), 0, claim_ahead_ms=10, min_claim_interval_ms=1)
    await _holding(queue, clock, 2)
    await workers.stop()
    [s] = await queue.stats([0])
    assert (s.depth, s.inflight) == (2, 0)  # back in *due*, not in flight until a lease ends
    assert ran.seen == []
    workers.start(queue, ran.registry(), 0, claim_ahead_ms=10, min_claim_interval_ms=1)
    await _holding(queue, clock, 2)
    for _ in range(6):
        await clock.advance(1)
        await settle(clock)
    assert ran.ids == ids
    assert [at for _, at in ran.seen] == [START_MS + 2, START_MS + 6]
    await at_rest(queue, 0)


def test_claim_ahead_is_bounded() -> None:
    assert TaskServerConfig().claim_ahead_ms > 0
    for bad in (-1, 1001):
        with pytest.raises(ValueError, match="claim_ahead_ms"):
            TaskServerConfig(claim_ahead_ms=bad)
