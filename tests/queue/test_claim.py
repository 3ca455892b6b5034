"""Claim, ack, renew, expiry of in-flight batches, recover and release."""

from __future__ import annotations

from redis.asyncio import Redis

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent, RetryPolicy, codec
from common.queue.constants import DUE_MS_MAX
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


async def test_a_malformed_entry_goes_to_dead_letters_alone(
    queue: EventQueue, clock: ManualClock, redis: Redis
) -> None:
    """An entry the batch cannot be cut around (no header, wrong prefix, a size field that
    is not its body's) used to end the split and take the later events with it."""
    ids = await _schedule(queue, 4)
    k = queue.keys(0)
    good = codec.encode(900, "k", 0, START_MS, 0, {}, 0, False)
    broken = {
        b"short!": "bad header",
        b"\xff" * 6 + good[6:]: "bad header",
        good[:36] + b"zzzzzz" + good[42:]: "unreadable body size",
        codec.encode(901, "k", 0, START_MS, 0, {}, 0, True)[:42] + b"\x90" * 300: "header says",
        codec.encode(902, "k", 0, START_MS, 0, {"x": "y" * 50}, 0, False)[:-9]: "header says",
        # Lua reads a size up to a NUL: framed for it, so both sides must cut it alike
        codec.HEADER_MEMORY[:-4] % (32768, 903, START_MS) + b"1\0\0\0\0\0" + b"\x00" * 1: "",
    }
    await redis.zadd(k.due, {blob: START_MS + 1 for blob in broken})
    await clock.advance(10)
    claim = await queue.claim(0, 100)
    assert [e.id for e in claim.events] == ids
    nul_framed = codec.member(0, 903)
    assert claim.bad == [(nul_framed, claim.bad[0][1])]  # decoded alone, named alone
    buried = dict(claim.buried)
    assert len(buried) == 5
    for blob, reason in broken.items():
        if reason:
            assert reason in buried[blob[:22]], (blob[:40], buried)
    # the batch holds only what can be cut: retry and ack work on it as usual
    assert await queue.bury(0, claim.token, claim.bad) == 1
    retried, _ = await queue.retry(0, claim.token, [(claim.events[1], "x")], RetryPolicy())
    assert retried == 1
    assert await queue.ack(0, claim.token) is True
    dead = {d.member: d for d in await queue.dead()}
    assert set(dead) == {blob[:22] for blob in broken}
    assert all(d.error for d in dead.values())
    [s] = await queue.stats([0])
    assert (s.ready, s.inflight, s.dead) == (0, 0, 6) and s.depth == 1  # the retried one


async def test_entries_scored_outside_due_times_go_to_dead_letters(
    queue: EventQueue, clock: ManualClock, redis: Redis
) -> None:
    """A score no due time can have: +inf used to raise OverflowError in every claim."""
    ids = await _schedule(queue, 2)
    k = queue.keys(0)
    scores = [float("inf"), float("-inf"), DUE_MS_MAX + 1, -5]
    odd = [codec.encode(950 + i, "k", 0, START_MS, 0, {}, 0, False) for i in range(4)]
    await redis.zadd(k.due, dict(zip(odd, scores, strict=True)))
    await clock.advance(10)
    claim = await queue.claim(0, 100)
    assert [e.id for e in claim.events] == ids
    assert claim.next_due_ms is None
    assert sorted(claim.buried) == sorted(
        (b[:22], f"due score out of range: {s}")
        for b, s in zip(odd, ["inf", "-inf", str(DUE_MS_MAX + 1), "-5"], strict=True)
    )
    assert {d.id for d in await queue.dead()} == {950, 951, 952, 953}
    assert await redis.zcard(k.due) == 0
    # a score that is still there (written after the claim) reads as no time, not a crash
    await redis.zadd(k.due, {odd[0]: float("inf")})
    [s] = await queue.stats([0])
    assert s.oldest_due_ms is None
