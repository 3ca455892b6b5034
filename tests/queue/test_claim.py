"""Claim, ack, renew, expiry of in-flight batches, recover and release."""

from __future__ import annotations

from redis.asyncio import Redis

from common.clock import ManualClock
from gameserver.queue import Event, EventQueue, NewEvent, RetryPolicy
from tests.queue.conftest import START_MS


async def _schedule(queue: EventQueue, n: int, village: int = 0) -> list[int]:
    return await queue.schedule_many(
        [NewEvent("k", village, START_MS + i, {"i": i}) for i in range(n)]
    )


async def test_claim_moves_events_in_flight_and_ack_forgets_them(
    queue: EventQueue, clock: ManualClock, redis: Redis
) -> None:
    ids = await _schedule(queue, 5)
    await clock.advance(2)  # three are due
    claim = await queue.claim(0, 10, 1_000)
    assert [e.id for e in claim.events] == ids[:3]
    assert claim.next_due_ms == START_MS + 3
    assert claim.next_deadline_ms == START_MS + 2 + 1_000
    [s] = await queue.stats([0])
    assert (s.depth, s.ready, s.inflight) == (2, 0, 3)
    assert await queue.ack(0, claim.token) is True
    [s] = await queue.stats([0])
    assert (s.depth, s.inflight) == (2, 0)
    k = queue.keys(0)
    assert await redis.zcard(k.due) == 2 and await redis.hlen(k.batches) == 0
    assert await queue.ack(0, claim.token) is False  # twice: nothing left


async def test_limit_and_ack_riding_on_the_next_claim(
    queue: EventQueue, clock: ManualClock
) -> None:
    ids = await _schedule(queue, 5)
    await clock.advance(10)
    first = await queue.claim(0, 2)
    second = await queue.claim(0, 2, ack=[first.token])
    assert [e.id for e in first.events + second.events] == ids[:4]
    [s] = await queue.stats([0])
    assert s.inflight == 2  # the first batch was acked by the second claim


async def test_expired_batch_returns_to_due_in_order(queue: EventQueue, clock: ManualClock) -> None:
    ids = await _schedule(queue, 4)
    await clock.advance(3)
    stale = await queue.claim(0, 2, 500)
    assert [e.id for e in stale.events] == ids[:2]
    await clock.advance(499)
    assert [e.id for e in (await queue.claim(0, 1, 500)).events] == [ids[2]]
    await clock.advance(2)  # the first batch's lease is over
    again = await queue.claim(0, 10, 500)
    assert [e.id for e in again.events] == [ids[0], ids[1], ids[3]]
    assert await queue.ack(0, stale.token) is False  # too late: it was handed out again


async def test_renew_keeps_a_long_batch(queue: EventQueue, clock: ManualClock) -> None:
    await _schedule(queue, 2)
    await clock.advance(5)
    claim = await queue.claim(0, 10, 1_000)
    await clock.advance(800)
    assert await queue.renew(0, [claim.token, b"unknown"], 1_000) == 1
    await clock.advance(800)  # past the first deadline, within the renewed one
    assert not (await queue.claim(0)).events
    assert await queue.ack(0, claim.token) is True


async def test_recover_and_release_return_batches_at_once(
    queue: EventQueue, clock: ManualClock
) -> None:
    ids = await _schedule(queue, 6)
    await clock.advance(10)
    a = await queue.claim(0, 2)
    b = await queue.claim(0, 2)
    assert await queue.release(0, b.token) == 2
    assert await queue.recover(0) == 2  # a: its owner died
    again = await queue.claim(0, 10)
    assert [e.id for e in again.events] == ids
    assert await queue.ack(0, a.token) is False


async def test_missing_reports_durable_ids_unknown_to_redis(
    queue: EventQueue, clock: ManualClock
) -> None:
    events = [Event(100 + i, "k", 0, START_MS + i, 0, {}, 0, True) for i in range(4)]
    assert await queue.index(events) == 4
    assert await queue.index(events) == 0  # known ones are left alone
    await clock.advance(10)
    claim = await queue.claim(0, 2)  # in flight still counts as known
    await queue.retry(0, claim.token, [(claim.events[0], "x")], RetryPolicy(max_attempts=1))
    # ... and so does a dead one
    assert await queue.missing(0, [100, 101, 102, 103, 42, 43]) == [42, 43]
