"""Written order: events run by (due_ms, priority, id), across batches and claims."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sized

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue import Event, EventQueue, NewEvent
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from tests.conftest import delete_prefix
from tests.queue.conftest import START_MS, Workers, eventually

# small ranges make ties on due time and priority common
events_st = st.lists(st.tuples(st.integers(-5, 5), st.integers(-2, 2)), min_size=1, max_size=60)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=events_st, batch=st.integers(1, 9), seed=st.integers(0, 2**32))
async def test_claims_follow_due_then_priority_then_id(
    redis: Redis, spec: list[tuple[int, int]], batch: int, seed: int
) -> None:
    prefix = f"wgt{uuid.uuid4().hex[:10]}"
    clock = ManualClock(START_MS)
    ids = IdGenerator(clock, node=3)
    queue = EventQueue(redis, prefix=prefix, partitions=1, clock=clock, ids=ids)
    try:
        new = [
            NewEvent("k", 1, START_MS + due, {"n": n}, priority=prio, id=ids.next_id())
            for n, (due, prio) in enumerate(spec)
        ]
        random.Random(seed).shuffle(new)  # scheduling order must not matter
        half = len(new) // 2
        await queue.schedule_many(new[:half])
        await queue.schedule_many(new[half:])
        await clock.advance(10)
        order: list[Event] = []
        while claim := await queue.claim(0, batch):
            order.extend(claim.events)
            await queue.ack(0, claim.token)
        assert [(e.due_ms, e.priority, e.id) for e in order] == sorted(
            (n.due_ms, n.priority, n.id) for n in new
        )
    finally:
        await queue.aclose()
        await delete_prefix(redis, prefix)


async def test_ids_break_ties_in_creation_order(queue: EventQueue) -> None:
    """Same due ms, same priority: the event scheduled first runs first."""
    first = await queue.schedule(NewEvent("k", 0, START_MS, {"n": 1}))
    second = await queue.schedule(NewEvent("k", 0, START_MS, {"n": 2}))
    urgent = await queue.schedule(NewEvent("k", 0, START_MS, {"n": 3}, priority=-1))
    claim = await queue.claim(0)
    assert [e.id for e in claim.events] == [urgent, first, second]


async def test_worker_runs_a_village_in_order_across_batches(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    seen: list[tuple[int, int, int]] = []

    async def record(ctx: Tx, events: list[Event]) -> None:
        seen.extend((e.due_ms, e.priority, e.id) for e in events)

    registry = HandlerRegistry()
    registry.register("a", record, durable=False)
    registry.register("b", record, durable=False)
    rng = random.Random(7)
    new = [
        NewEvent(rng.choice("ab"), 4 * rng.randrange(50), START_MS + rng.randrange(30),
                 priority=rng.randrange(-1, 2))
        for _ in range(400)
    ]  # fmt: skip
    ids = await queue.schedule_many(new)
    workers.start(queue, registry, 0, batch_size=7)
    await clock.advance(40)
    await eventually(lambda: _done(seen, 400))
    expected = sorted(zip(((n.due_ms, n.priority) for n in new), ids, strict=True))
    assert seen == [(due, prio, i) for (due, prio), i in expected]


async def _done(seen: Sized, n: int) -> bool:
    return len(seen) >= n
