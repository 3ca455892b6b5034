"""Failures: backoff, dead letters with error and attempts, isolation, timeouts, bad entries."""

from __future__ import annotations

import asyncio
from collections import Counter

import msgpack
from redis.asyncio import Redis

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent, RetryPolicy, codec
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.snapshot_versions import version_key
from tests.queue.conftest import START_MS, Workers, at_rest, eventually, settle


class Recorder:
    """A handler that records what it ran and fails for events whose payload says so."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.ran: Counter[int] = Counter()

    async def __call__(self, ctx: Tx, events: list[Event]) -> None:
        self.calls.append([e.id for e in events])
        for e in events:
            if e.payload.get("fail"):
                raise LookupError(f"village {e.village_id} does not exist")
            if e.payload.get("hang"):
                await asyncio.Event().wait()  # never set: only the handler timeout ends it
        self.ran.update(e.id for e in events)


def _registry(rec: Recorder, **options: object) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register("k", rec, durable=False, **options)  # type: ignore[arg-type]
    return registry


async def test_failures_back_off_then_die_with_error_and_attempts(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    rec = Recorder()
    policy = RetryPolicy(max_attempts=3, base_ms=1_000, max_ms=60_000)
    bad = await queue.schedule(NewEvent("k", 0, START_MS, {"fail": True}))
    worker = workers.start(queue, _registry(rec, retry=policy), 0)
    await eventually(lambda: _calls(rec, 1))
    await at_rest(queue, 1)
    # failure 1 -> due again 1 s later, not before
    await clock.advance(999)
    await settle(clock)
    assert len(rec.calls) == 1
    await clock.advance(1)
    await eventually(lambda: _calls(rec, 2))
    await at_rest(queue, 1)
    # failure 2 -> 2 s later
    await clock.advance(1_999)
    await settle(clock)
    assert len(rec.calls) == 2
    await clock.advance(1)
    await eventually(lambda: _calls(rec, 3))
    # failure 3 = max_attempts -> dead
    await eventually(lambda: _dead_count(queue, 1))
    [dead] = await queue.dead()
    assert (dead.id, dead.attempts) == (bad, 3)
    assert dead.error == "LookupError: village 0 does not exist"
    assert dead.event is not None and dead.event.payload == {"fail": True}
    assert worker.metrics.retried.labels("0")._value.get() == 2
    assert worker.metrics.dead.labels("0")._value.get() == 1
    await clock.advance(3_600_000)
    await settle(clock)
    assert len(rec.calls) == 3  # the dead stay dead
    # an operator requeues it: it runs again, fails again, with a fresh attempt count
    assert await queue.requeue_dead(0, bad) is True
    await eventually(lambda: _calls(rec, 4))
    assert await queue.drop_dead(0, bad) is False  # it is pending, not dead
    [s] = await queue.stats([0])
    assert s.depth == 1 and s.dead == 0


async def test_a_bad_event_is_isolated_from_its_batch(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    rec = Recorder()
    ids = await queue.schedule_many(
        [NewEvent("k", 0, START_MS, {"fail": i == 3}) for i in range(8)]
    )
    workers.start(queue, _registry(rec), 0)
    await eventually(lambda: _ran(rec, 7))
    assert rec.calls[0] == ids  # the whole batch at once first
    assert rec.calls[1:] == [[i] for i in ids]  # then one by one
    assert set(rec.ran) == set(ids) - {ids[3]}
    # the successes of the failed batch call are not recorded: only the one-by-one runs count
    assert all(n == 1 for n in rec.ran.values())
    await at_rest(queue, 1)  # the bad one waits for its retry


async def test_a_hanging_handler_times_out_and_the_worker_goes_on(
    queue: EventQueue, clock: ManualClock, workers: Workers
) -> None:
    rec = Recorder()
    await queue.schedule(NewEvent("k", 0, START_MS, {"hang": True}))
    ok = await queue.schedule(NewEvent("k", 4, START_MS + 1))
    workers.start(queue, _registry(rec, timeout_s=0.2), 0)
    await clock.advance(1)
    await eventually(lambda: _ran(rec, 1))
    assert list(rec.ran) == [ok]

    await at_rest(queue, 1)  # the hanging one is back for a retry


async def test_unknown_kinds_and_malformed_entries_go_to_dead_letters(
    queue: EventQueue, clock: ManualClock, workers: Workers, redis: Redis
) -> None:
    rec = Recorder()
    unknown = await queue.schedule(NewEvent("nobody.handles.this", 0, START_MS))
    k = queue.keys(0)
    # entries whose body after a valid header is garbage, or has the wrong shape
    for event_id, body in ((777, b"\xc1garbage"), (778, msgpack.packb([778, "k"]))):
        blob = codec.HEADER_MEMORY % (32768, event_id, START_MS, len(body)) + body
        await redis.zadd(k.due, {blob: START_MS})
    good = await queue.schedule(NewEvent("k", 0, START_MS + 1))
    workers.start(queue, _registry(rec), 0)
    await clock.advance(1)
    await eventually(lambda: _ran(rec, 1))
    await eventually(lambda: _dead_count(queue, 3))
    dead = {d.id: d for d in await queue.dead()}
    assert "unknown event kind 'nobody.handles.this'" in dead[unknown].error
    assert dead[unknown].event is not None
    assert dead[777].error.startswith("undecodable payload")
    assert dead[777].event is None
    assert dead[778].error.startswith("undecodable payload")
    assert list(rec.ran) == [good]
    assert await queue.drop_dead(0, 778) is True
    assert await queue.drop_dead(0, 778) is False
    assert await queue.requeue_dead(0, 777) is True  # as is: it dies again
    await eventually(lambda: _dead_count(queue, 2))
    assert {d.id for d in await queue.dead()} == {unknown, 777}


async def test_follow_ups_of_in_memory_handlers_are_scheduled(
    queue: EventQueue, clock: ManualClock, workers: Workers, redis: Redis, redis_prefix: str
) -> None:
    seen: list[str] = []

    async def chain(ctx: Tx, events: list[Event]) -> None:
        for e in events:
            seen.append(e.payload["step"])
            if e.payload["step"] == "first":
                ctx.schedule("chain", e.village_id, ctx.now_ms + 500, {"step": "next"})
                ctx.touch_players([42])

    registry = HandlerRegistry()
    registry.register("chain", chain, durable=False)
    await queue.schedule(NewEvent("chain", 0, START_MS, {"step": "first"}))
    workers.start(queue, registry, 0)
    await eventually(lambda: _len(seen, 1))

    async def bumped() -> bool:  # after the handler: the worker bumps, then sleeps
        return await redis.get(version_key(redis_prefix, 42)) is not None

    await eventually(bumped)
    await clock.advance(500)
    await eventually(lambda: _len(seen, 2))
    assert seen == ["first", "next"]


async def _calls(rec: Recorder, n: int) -> bool:
    return len(rec.calls) >= n


async def _ran(rec: Recorder, n: int) -> bool:
    return sum(rec.ran.values()) >= n


async def _len(items: list[str], n: int) -> bool:
    return len(items) >= n


async def _dead_count(queue: EventQueue, n: int) -> bool:
    return sum(s.dead for s in await queue.stats()) >= n


async def test_retries_and_requeues_move_the_run_time_not_the_game_time(
    queue: EventQueue, clock: ManualClock
) -> None:
    await queue.schedule(NewEvent("k", 0, START_MS))
    claim = await queue.claim(0)
    policy = RetryPolicy(max_attempts=2, base_ms=1_000)
    assert await queue.retry(0, claim.token, [(claim.events[0], "x")], policy) == (1, 0)
    [s] = await queue.stats([0])
    assert s.oldest_due_ms == START_MS + 1_000  # it runs after the backoff ...
    await clock.advance(1_000)
    again = await queue.claim(0)
    [event] = again.events
    assert (event.due_ms, event.attempts) == (START_MS, 1)  # ... as of its own due time
    assert await queue.release(0, again.token) == 1  # handed back: still after its backoff
    [s] = await queue.stats([0])
    assert s.oldest_due_ms == START_MS + 1_000
    last = await queue.claim(0)
    assert await queue.retry(0, last.token, [(last.events[0], "y")], policy) == (0, 1)
    await clock.advance(5_000)
    assert await queue.requeue_dead(0, event.id) is True
    [s] = await queue.stats([0])
    assert s.oldest_due_ms == START_MS + 6_000  # runs now ...
    [event] = (await queue.claim(0)).events
    assert (event.due_ms, event.attempts) == (START_MS, 0)  # ... as of its own due time
