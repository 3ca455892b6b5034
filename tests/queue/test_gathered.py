"""Durable groups of several partitions' workers run in one transaction (``common.queue.gathered``):
one handler call, each worker's events acked by it, follow-ups run, a failing gathered
call re-run group by group so the bad event alone is retried, each worker deferring and
counting again its own events. A plug holds the gatherer's
one slot until every worker's group waits: no timing decides what runs together."""

from __future__ import annotations

import asyncio

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent
from common.queue.durable import reschedule_durable, take_events
from common.queue.gathered import GatheredRuns, Ran
from common.queue.handlers import HandlerRegistry, Registration
from common.queue.tx import Tx
from db.models import ScheduledEvent
from gameserver.metrics import QueueMetrics
from tests.queue.conftest import START_MS, Workers, at_rest, commit_events, counts, eventually
from tests.queue.testgame import EFFECT, effects

PARTITIONS = 4


async def _effects(ctx: Tx, events: list[Event]) -> None:
    await ctx.session.execute(
        insert(effects), [{"event_id": e.id, "village_id": e.village_id} for e in events]
    )
    if any(e.payload.get("fail") for e in events):
        raise RuntimeError("this event is meant to fail")
    for e in events:
        if e.payload.get("follow"):
            ctx.schedule("home", e.village_id, ctx.now_ms + 1_000)


class Recorded:
    """The handler, recording the villages of each call's events."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    async def __call__(self, ctx: Tx, events: list[Event]) -> None:
        self.calls.append([e.village_id for e in events])
        await _effects(ctx, events)


async def _run_together(
    workers: Workers,
    queue: EventQueue,
    registry: HandlerRegistry,
    sessions: async_sessionmaker[AsyncSession],
    gathered: GatheredRuns,
    *,
    clock: ManualClock | None = None,
    wait_ms: int = 0,
) -> QueueMetrics:
    """Start a worker per partition behind a plug that holds the gatherer's one slot until
    every worker's group waits (and ``clock`` moved ``wait_ms`` more): they then run
    together, as groups that come while the slots are busy do. Returns once the plug let
    go (the workers' metrics)."""

    async def all_wait() -> bool:
        return sum(len(groups) for groups in gathered.waiting.values()) >= PARTITIONS

    async def hold(reg: Registration, group: list[Event]) -> Ran:
        await eventually(all_wait)
        if clock is not None:
            await clock.advance(wait_ms)
        return Ran([], [], None)

    reg = registry.get(EFFECT)
    assert reg is not None
    plug = asyncio.create_task(gathered.run(reg, [], hold))
    metrics = QueueMetrics()
    for p in range(PARTITIONS):
        workers.start(queue, registry, p, sessions=sessions, gathered=gathered, metrics=metrics)
    await plug
    return metrics


def _acked(metrics: QueueMetrics) -> dict[int, float]:
    return {p: metrics.acked.labels(str(p))._value.get() for p in range(PARTITIONS)}


def _redelivered(metrics: QueueMetrics) -> dict[int, float]:
    """Events a worker was told had run before (its own group's split got wrong)."""
    return {p: metrics.redelivered.labels(str(p))._value.get() for p in range(PARTITIONS)}


async def test_groups_of_several_partitions_run_in_one_transaction(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    gathered = GatheredRuns(slots=1, max_batch=100)
    handler = Recorded()
    homes: list[int] = []

    async def come_home(ctx: Tx, events: list[Event]) -> None:
        homes.extend(e.village_id for e in events)

    registry = HandlerRegistry()
    registry.register(EFFECT, handler)
    registry.register("home", come_home)
    # one event in each partition's village (village % 4 == partition), all due at once
    await commit_events(
        sessions,
        queue,
        [NewEvent(EFFECT, v, START_MS, {"follow": 1}) for v in range(PARTITIONS)],
    )
    metrics = await _run_together(
        workers, queue, registry, sessions, gathered, clock=clock, wait_ms=30
    )
    await eventually(lambda: _processed(sessions, PARTITIONS))
    await at_rest(queue, PARTITIONS)  # the four follow-ups wait, the effects were acked
    # late by the 30 ms they waited for the transaction (between the 25 and 50 ms bounds)
    [lateness] = metrics.lateness.collect()
    buckets = {s.labels["le"]: s.value for s in lateness.samples if s.name.endswith("_bucket")}
    assert (buckets["0.025"], buckets["0.05"]) == (0, PARTITIONS)
    [call] = handler.calls
    assert sorted(call) == list(range(PARTITIONS))  # four partitions' events: ONE call
    assert gathered.gathered_calls == 1
    assert metrics.transactions.labels(EFFECT)._value.get() == 1
    assert metrics.transaction_events.labels(EFFECT)._value.get() == PARTITIONS
    # each worker acked its own event as run by it, and no event ran twice
    assert _acked(metrics) == dict.fromkeys(range(PARTITIONS), 1)
    assert _redelivered(metrics) == dict.fromkeys(range(PARTITIONS), 0)
    c = await counts(sessions)
    assert c == {"processed": 4, "effects": 4, "distinct": 4, "pending": 4}
    # the follow-ups the gathered transaction scheduled in the four villages all run
    await clock.advance(1_000)
    await eventually(lambda: _has(homes, PARTITIONS))
    assert sorted(homes) == list(range(PARTITIONS))
    await at_rest(queue, 0)
    assert (await counts(sessions))["pending"] == 0


async def _has(items: list[int], n: int) -> bool:
    return len(items) >= n


async def _processed(sessions: async_sessionmaker[AsyncSession], n: int) -> bool:
    return (await counts(sessions))["processed"] >= n


async def test_a_bad_event_in_a_gathered_call_fails_alone(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    gathered = GatheredRuns(slots=1, max_batch=100)
    handler = Recorded()
    registry = HandlerRegistry()
    registry.register(EFFECT, handler)
    # partition 2's event fails the gathered call of the four
    events = await commit_events(
        sessions,
        queue,
        [NewEvent(EFFECT, v, START_MS, {"fail": v == 2}) for v in range(PARTITIONS)],
    )
    metrics = await _run_together(workers, queue, registry, sessions, gathered)
    await eventually(lambda: _processed(sessions, PARTITIONS - 1))
    await at_rest(queue, 1)  # the bad one waits for its retry; the others were acked
    together, *alone = handler.calls
    assert sorted(together) == list(range(PARTITIONS))
    # the gathered call rolled back; each of its groups then ran on its own, once
    assert sorted(v for call in alone for v in call) == list(range(PARTITIONS))
    assert gathered.gathered_calls == 0
    c = await counts(sessions)
    assert c == {"processed": 3, "effects": 3, "distinct": 3, "pending": 1}
    async with sessions() as session:
        [row] = list(await session.scalars(select(ScheduledEvent)))
    assert row.id == events[2].id and row.attempts == 1  # one attempt: its own call's
    assert _acked(metrics) == {0: 1, 1: 1, 2: 0, 3: 1}


async def test_each_worker_defers_and_counts_again_its_own_events(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """In one gathered call: partition 1's event was rescheduled after it was indexed (its
    worker defers it to the new time), partition 3's had already run (its worker counts it
    delivered again, without effect); the others run."""
    gathered = GatheredRuns(slots=1, max_batch=100)
    handler = Recorded()
    registry = HandlerRegistry()
    registry.register(EFFECT, handler)
    events = await commit_events(
        sessions, queue, [NewEvent(EFFECT, v, START_MS) for v in range(PARTITIONS)]
    )
    async with sessions() as session, session.begin():
        assert await reschedule_durable(session, events[1].id, START_MS + 60_000)
        # as if a worker ran it and died before its ack: the row taken, the record kept
        await take_events(session, [events[3]], START_MS)
    metrics = await _run_together(workers, queue, registry, sessions, gathered)
    await eventually(lambda: _processed(sessions, 3))  # 0, 2 and the one taken before
    await at_rest(queue, 1)  # the deferred one waits at its new time
    [call] = handler.calls
    assert sorted(call) == [0, 2]  # one call; the handler got only the events to run
    assert gathered.gathered_calls == 1
    assert _redelivered(metrics) == {0: 0, 1: 0, 2: 0, 3: 1}
    [stats] = await queue.stats([1])
    assert stats.oldest_due_ms == START_MS + 60_000 and stats.inflight == 0
    assert (await counts(sessions))["effects"] == 2
