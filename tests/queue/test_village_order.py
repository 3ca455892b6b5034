"""A village's events run in their order even when Redis lacks one of them for a while
(its creator committed and has not indexed it yet, an index that failed, a Redis restart),
and a retried event in a batch does not let a later one past the lookahead barrier."""

from __future__ import annotations

import logging

import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent, codec
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.queue.worker import PartitionWorker
from tests.calls import record_calls
from tests.queue.conftest import START_MS, Workers, eventually

KIND = "arrive"


def _recording(seen: list[int], lookahead_ms: int | None = None) -> HandlerRegistry:
    async def record(ctx: Tx, events: list[Event]) -> None:
        seen.extend(e.id for e in events)

    registry = HandlerRegistry()
    registry.register(KIND, record)
    if lookahead_ms is not None:
        registry.set_lookahead(lookahead_ms)
    return registry


async def test_an_earlier_event_redis_lacks_runs_before_a_later_one_of_its_village(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """The chaos run's late production change: a battle's news of losses was committed but
    not indexed (the Redis connection broke after the commit), and a later event of the
    home village ran first and settled it past the news' due time. The worker now finds
    the earlier event in the database, indexes it and runs it first."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        news, later = await add_durable_events(
            session,
            [NewEvent(KIND, 0, START_MS + 100), NewEvent(KIND, 0, START_MS + 500)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index([later])  # the news' index was lost
    workers.start(queue, _recording(seen), 0, sessions=sessions)
    await clock.advance(1_000)
    await eventually(lambda: _ran(seen, 2))
    assert seen == [news.id, later.id]


async def test_a_retried_event_does_not_let_a_later_one_past_the_barrier(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
    redis: Redis,
) -> None:
    """A retried event is claimed at its backoff time, not its due time, so a batch is not
    sorted by due time. The barrier took the batch's last events as the ones beyond it and
    put back the retried one instead of the event that was beyond it."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        stuck, retried, beyond = await add_durable_events(
            session,
            # village 1 is in partition 1, which has no worker: its event stays pending
            [NewEvent(KIND, 1, START_MS), NewEvent(KIND, 4, START_MS + 100),
             NewEvent(KIND, 0, START_MS + 5_000)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index([stuck, beyond])
    # the retried event failed once and waits for its backoff, past the later event
    keys = queue.keys(0)
    blob = codec.encode_event(retried, attempts=1, score_ms=START_MS + 6_000)
    await redis.zadd(keys.due, {blob: START_MS + 6_000})
    await redis.hset(keys.byid, codec.id_key(retried.id), blob)  # type: ignore[misc]
    worker = workers.start(queue, _recording(seen, lookahead_ms=1_000), 0, sessions=sessions)
    await clock.advance(6_500)
    await eventually(lambda: _ran(seen, 1))
    await eventually(lambda: _held(worker.metrics, 1))  # the batch is over
    assert seen == [retried.id]  # within the lookahead of the stuck event; the other waits


async def _ran(seen: list[int], n: int) -> bool:
    return len(seen) >= n


async def _held(metrics: object, n: int) -> bool:
    counter = metrics.held_back.labels("0")  # type: ignore[attr-defined]
    return bool(counter._value.get() >= n)


async def test_events_held_back_for_long_are_named_in_a_warning_and_counted(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An operator sees what holds a partition back: the event it waits for, and why."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        stuck, beyond = await add_durable_events(
            session,
            [NewEvent(KIND, 1, START_MS), NewEvent(KIND, 0, START_MS + 5_000)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index([beyond])
    worker = workers.start(queue, _recording(seen, lookahead_ms=1_000), 0, sessions=sessions)
    caplog.set_level(logging.WARNING, logger="common.queue.worker")

    async def warned() -> bool:
        await clock.advance(100)  # the held event is claimed again 100 ms later
        return any(f"waiting for event {stuck.id}" in r.getMessage() for r in caplog.records)

    await clock.advance(5_000)
    await eventually(warned)
    [message] = [r.getMessage() for r in caplog.records if "held back" in r.getMessage()]
    assert "lookahead barrier" in message and "village 1" in message
    assert worker.metrics.long_holds.labels("lookahead barrier")._value.get() == 1
    assert worker.metrics.hold_seconds.labels("0")._value.get() >= 5
    assert seen == []


async def _claimed_ahead(queue: EventQueue, clock: ManualClock, n: int) -> bool:
    [stats] = await queue.stats([0])
    return stats.inflight == n and stats.depth == 0 and clock.slept_on()


async def test_an_event_committed_while_a_later_one_waits_claimed_ahead_runs_first(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """A batch claimed ahead has its village order checked when it is due, so an earlier
    event of its village committed while it waited (and not indexed: its creator died)
    runs first."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        [later] = await add_durable_events(
            session, [NewEvent(KIND, 0, START_MS + 50)], clock=clock, ids=queue.ids
        )
    await queue.index([later])
    workers.start(queue, _recording(seen), 0, sessions=sessions, claim_ahead_ms=100)
    await eventually(lambda: _claimed_ahead(queue, clock, 1))
    async with sessions() as session, session.begin():
        [earlier] = await add_durable_events(
            session, [NewEvent(KIND, 0, START_MS + 20)], clock=clock, ids=queue.ids
        )
    await clock.advance(100)
    await eventually(lambda: _ran(seen, 2))
    assert seen == [earlier.id, later.id]


async def test_a_batch_claimed_ahead_checks_its_order_once(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check ran when the batch was claimed and again when it was due: two database
    reads per batch where one answers (the first one's answer could change meanwhile)."""
    checks = record_calls(monkeypatch, PartitionWorker, "_in_order")
    seen: list[int] = []
    async with sessions() as session, session.begin():
        events = await add_durable_events(
            session, [NewEvent(KIND, v, START_MS + 50) for v in (0, 4, 8)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index(events)
    workers.start(queue, _recording(seen), 0, sessions=sessions, claim_ahead_ms=100)
    await eventually(lambda: _claimed_ahead(queue, clock, 3))
    assert len(checks) == 0
    await clock.advance(100)
    await eventually(lambda: _ran(seen, 3))
    assert len(checks) == 1


async def test_durable_events_left_after_a_step_are_checked_again_when_due(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """A batch claimed ahead runs in steps: after its first step ran, an earlier event of
    the village of one left waiting (committed meanwhile, not indexed) still runs first."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        first, later = await add_durable_events(
            session, [NewEvent(KIND, 4, START_MS + 20), NewEvent(KIND, 0, START_MS + 80)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index([first, later])
    workers.start(queue, _recording(seen), 0, sessions=sessions, claim_ahead_ms=100)
    await eventually(lambda: _claimed_ahead(queue, clock, 2))
    await clock.advance(20)
    await eventually(lambda: _ran(seen, 1))
    async with sessions() as session, session.begin():
        [earlier] = await add_durable_events(
            session, [NewEvent(KIND, 0, START_MS + 50)], clock=clock, ids=queue.ids
        )
    await clock.advance(80)
    await eventually(lambda: _ran(seen, 3))
    assert seen == [first.id, earlier.id, later.id]
