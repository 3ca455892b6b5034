"""Scheduling: ids, partitions, validation (all or nothing), due times in the past."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from common.clock import ManualClock
from common.queue import EventQueue, NewEvent, ScheduleError
from common.queue.constants import wake_channel
from tests.queue.conftest import START_MS

DAY_MS = 86_400_000


async def test_schedule_returns_ids_and_partitions_by_village(queue: EventQueue) -> None:
    ids = await queue.schedule_many(
        [NewEvent("k", village, START_MS + 10, {"v": village}) for village in range(10)]
    )
    assert len(set(ids)) == 10 and ids == sorted(ids)
    depth = {s.partition: s.depth for s in await queue.stats()}
    assert depth == {0: 3, 1: 3, 2: 2, 3: 2}
    assert [queue.partition_of(v) for v in (0, 5, 7, 1024)] == [0, 1, 3, 0]
    one = await queue.schedule(NewEvent("k", 3, START_MS, id=123_456))
    assert one == 123_456


async def test_a_due_time_in_the_past_runs_at_once(queue: EventQueue) -> None:
    await queue.schedule(NewEvent("late", 4, START_MS - 3_600_000))
    await queue.schedule(NewEvent("later", 4, START_MS + 1))
    claim = await queue.claim(0)
    assert [e.kind for e in claim.events] == ["late"]
    assert claim.next_due_ms == START_MS + 1


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (NewEvent("k", 1, START_MS + 367 * DAY_MS), "days ahead"),
        (NewEvent("k", 1, -5), "negative"),
        (NewEvent("k", 1, START_MS, priority=40_000), "priority"),
        (NewEvent("", 1, START_MS), "kind"),
        (NewEvent("k" * 33, 1, START_MS), "kind"),
        (NewEvent("k", 1, START_MS, payload=[1, 2]), "payload must be a dict"),  # type: ignore[arg-type]
        (NewEvent("k", 1, START_MS, payload={"s": {1, 2}}), "cannot be encoded"),
        (NewEvent("k", "v1", START_MS), "village_id"),  # type: ignore[arg-type]
        (NewEvent("k", 1, float(START_MS)), "due_ms must be an int"),  # type: ignore[arg-type]
        (NewEvent("k", 1, START_MS, id=-1), "id must be"),
    ],
)
async def test_bad_events_are_rejected_and_nothing_is_scheduled(
    queue: EventQueue, bad: NewEvent, message: str
) -> None:
    good = [NewEvent("k", v, START_MS) for v in range(1200)]  # spans several send chunks
    with pytest.raises(ScheduleError, match=message):
        await queue.schedule_many([*good, bad])
    assert sum(s.depth for s in await queue.stats()) == 0


async def test_far_future_error_names_the_limit(queue: EventQueue) -> None:
    with pytest.raises(ScheduleError) as info:
        await queue.schedule(NewEvent("march", 1, START_MS * 1000))
    assert "days ahead" in str(info.value) and "seconds instead of ms" in str(info.value)


async def test_scheduling_publishes_a_wake_up_per_partition(
    make_queue: Callable[..., EventQueue], redis: Redis, redis_prefix: str, clock: ManualClock
) -> None:
    queue = make_queue(partitions=4)
    pubsub = redis.pubsub()
    await pubsub.subscribe(wake_channel(redis_prefix))
    try:
        await queue.schedule_many(
            [NewEvent("k", 1, START_MS + 50), NewEvent("k", 5, START_MS + 20), NewEvent("k", 2, 9)]
        )
        message = None
        for _ in range(100):  # the subscribe confirmation comes first (returned as None)
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
            if message is not None:
                break
        assert message is not None
        assert set(message["data"].split(b",")) == {b"1:%d" % (START_MS + 20), b"2:9"}
    finally:
        await pubsub.aclose()


async def test_concurrent_schedules_do_not_mix_replies(queue: EventQueue) -> None:
    batches = [[NewEvent("k", v, START_MS + i) for v in range(300)] for i in range(6)]
    results = await asyncio.gather(*(queue.schedule_many(b) for b in batches))
    assert len({i for ids in results for i in ids}) == 1800
    assert sum(s.depth for s in await queue.stats()) == 1800
