"""Durable events on SQLite and PostgreSQL: exactly-once effects, cancel and reschedule races,
follow-ups in the handler's transaction, rollback on failure."""

from __future__ import annotations

from redis.asyncio import Redis
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent, RetryPolicy, durable
from common.queue.durable import cancel_durable, reschedule_durable
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.snapshot_versions import version_key
from db.models import ProcessedEvent, ScheduledEvent
from tests.queue.conftest import START_MS, Workers, at_rest, commit_events, counts, eventually
from tests.queue.testgame import EFFECT, effects
from tests.queue.testgame.handlers import apply_effects


def _registry(**options: object) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register(EFFECT, apply_effects, durable=True, **options)  # type: ignore[arg-type]
    return registry


async def _at_least(sessions: async_sessionmaker[AsyncSession], key: str, n: int) -> bool:
    return (await counts(sessions))[key] >= n


async def test_durable_events_take_effect_once(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    events = await commit_events(
        sessions, queue, [NewEvent(EFFECT, v * 4, START_MS + v) for v in range(50)]
    )
    assert all(e.durable for e in events)
    worker = workers.start(queue, _registry(), 0, sessions=sessions, batch_size=16)
    await clock.advance(100)
    await eventually(lambda: _at_least(sessions, "processed", 50))
    await at_rest(queue, 0)  # every event acked: nothing left to run twice
    assert await counts(sessions) == {"processed": 50, "effects": 50, "distinct": 50, "pending": 0}
    # Redis hands the same events out again (a crash before the ack): no effect
    assert await queue.index(events) == 50
    await queue.recover(0)
    await clock.advance(1)
    await eventually(lambda: _redelivered(worker, 50))
    assert await counts(sessions) == {"processed": 50, "effects": 50, "distinct": 50, "pending": 0}
    assert sum(s.depth + s.inflight for s in await queue.stats()) == 0


async def test_cancel_durable_decides_the_race_with_the_worker(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    recalled, arrives = await commit_events(
        sessions, queue, [NewEvent(EFFECT, 0, START_MS + 10), NewEvent(EFFECT, 0, START_MS + 10)]
    )
    async with sessions() as session, session.begin():
        assert await cancel_durable(session, recalled.id) is True
    assert await queue.cancel(0, recalled.id) is True
    workers.start(queue, _registry(), 0, sessions=sessions)
    await clock.advance(10)
    await eventually(lambda: _at_least(sessions, "processed", 1))
    await at_rest(queue, 0)  # the recalled event too is gone: nothing left to run
    async with sessions() as session:
        ran = list(await session.scalars(select(effects.c.event_id)))
        assert await cancel_durable(session, arrives.id) is False  # it already ran
    assert ran == [arrives.id]


async def test_a_cancel_committed_after_the_claim_still_wins(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], clock: ManualClock, redis: Redis
) -> None:
    [event] = await commit_events(sessions, queue, [NewEvent(EFFECT, 0, START_MS)])
    claim = await queue.claim(0)  # a worker holds it in flight ...
    assert [e.id for e in claim.events] == [event.id]
    async with sessions() as session, session.begin():
        assert await cancel_durable(session, event.id) is True  # ... when the recall commits
    assert await queue.cancel(0, event.id) is False  # Redis cannot take it back
    async with sessions() as session, session.begin():
        run, deferred = await durable.take_events(session, claim.events, clock.now_ms())
    assert run == [] and deferred == []  # the worker finds no row: acked without effect


class _Abandon(Exception):
    """Rolls a transaction back on purpose."""


async def test_taking_an_event_records_it_processed_in_the_same_transaction(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], clock: ManualClock
) -> None:
    """The row goes and the processed record comes together (one statement on PostgreSQL),
    before the handler runs: a rollback (a failed handler, a crash) undoes both."""
    [due, later] = await commit_events(
        sessions, queue, [NewEvent(EFFECT, 0, START_MS), NewEvent(EFFECT, 4, START_MS)]
    )
    async with sessions() as session, session.begin():
        assert await reschedule_durable(session, later.id, START_MS + 60_000) is True
    claim = await queue.claim(0)
    assert {e.id for e in claim.events} == {due.id, later.id}
    try:
        async with sessions() as session, session.begin():
            run, deferred = await durable.take_events(session, claim.events, clock.now_ms())
            assert [e.id for e in run] == [due.id]
            assert [(e.id, at) for e, at in deferred] == [(later.id, START_MS + 60_000)]
            recorded = await session.scalars(select(ProcessedEvent.event_id))
            assert list(recorded) == [due.id]
            raise _Abandon
    except _Abandon:
        pass
    assert await counts(sessions) == {"processed": 0, "effects": 0, "distinct": 0, "pending": 2}
    async with sessions() as session, session.begin():
        run, _ = await durable.take_events(session, claim.events, clock.now_ms())
    assert [e.id for e in run] == [due.id]
    assert await counts(sessions) == {"processed": 1, "effects": 0, "distinct": 0, "pending": 1}


async def test_reschedule_durable_defers_an_event_already_claimed(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    [event] = await commit_events(sessions, queue, [NewEvent(EFFECT, 0, START_MS + 5)])
    async with sessions() as session, session.begin():
        assert await reschedule_durable(session, event.id, START_MS + 60_000) is True
    # the Redis side is not told (as if the command died before that): the worker defers it
    workers.start(queue, _registry(), 0, sessions=sessions)
    await clock.advance(5)
    await eventually(lambda: _due_is(queue, START_MS + 60_000))
    assert (await counts(sessions))["processed"] == 0
    await clock.advance(60_000)
    await eventually(lambda: _at_least(sessions, "processed", 1))
    assert (await counts(sessions))["effects"] == 1


async def test_failed_handler_rolls_back_then_retries_once(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    events = await commit_events(
        sessions,
        queue,
        [NewEvent(EFFECT, 0, START_MS, {"fail": i == 2}) for i in range(5)],
    )
    workers.start(
        queue, _registry(retry=RetryPolicy(max_attempts=2, base_ms=100)), 0, sessions=sessions
    )
    await eventually(lambda: _at_least(sessions, "processed", 4))
    await at_rest(queue, 1)  # the bad one waits for its retry, the rest were acked
    c = await counts(sessions)
    # the failing batch's effect rows were rolled back; each good event took effect once
    assert c == {"processed": 4, "effects": 4, "distinct": 4, "pending": 1}
    await at_rest(queue, 1)
    await clock.advance(100)
    await eventually(lambda: _dead(queue, 1))
    [dead] = await queue.dead()
    assert dead.id == events[2].id and dead.attempts == 2
    assert "meant to fail" in dead.error
    assert (await counts(sessions))["effects"] == 4


async def test_follow_ups_are_written_in_the_handlers_transaction(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
    redis: Redis,
    redis_prefix: str,
) -> None:
    async def arrive(ctx: Tx, events: list[Event]) -> None:
        await ctx.session.execute(
            insert(effects), [{"event_id": e.id, "village_id": e.village_id} for e in events]
        )
        for e in events:
            if e.payload.get("back"):
                ctx.schedule("return", e.payload["home"], ctx.now_ms + 1_000)
        ctx.touch_players([7, 8])

    returned: list[Event] = []

    async def come_home(ctx: Tx, events: list[Event]) -> None:
        returned.extend(events)

    registry = HandlerRegistry()
    registry.register("arrive", arrive)
    registry.register("return", come_home)
    await commit_events(sessions, queue, [NewEvent("arrive", 0, START_MS, {"back": 1, "home": 8})])
    workers.start(queue, registry, 0, sessions=sessions)
    await eventually(lambda: _at_least(sessions, "effects", 1))
    async with sessions() as session:
        [row] = list(await session.scalars(select(ScheduledEvent)))
    assert (row.kind, row.village_id, row.due_ms) == ("return", 8, START_MS + 1_000)
    await eventually(lambda: _version(redis, redis_prefix, 8))
    await clock.advance(1_000)
    await eventually(lambda: _len(returned, 1))
    assert returned[0].id == row.id and returned[0].durable
    c = await counts(sessions)
    assert c["processed"] == 2 and c["pending"] == 0
    async with sessions() as session:
        kinds = sorted(await session.scalars(select(ProcessedEvent.kind)))
    assert kinds == ["arrive", "return"]


async def _redelivered(worker: object, n: int) -> bool:
    return worker.metrics.redelivered.labels("0")._value.get() >= n  # type: ignore[attr-defined]


async def _due_is(queue: EventQueue, due_ms: int) -> bool:
    [s] = await queue.stats([0])
    return s.oldest_due_ms == due_ms and s.inflight == 0


async def _attempts(sessions: async_sessionmaker[AsyncSession], event_id: int, n: int) -> bool:
    async with sessions() as session:
        row = await session.get(ScheduledEvent, event_id)
        return row is not None and row.attempts >= n


async def _dead(queue: EventQueue, n: int) -> bool:
    return sum(s.dead for s in await queue.stats()) >= n


async def _version(redis: Redis, prefix: str, player: int) -> bool:
    return await redis.get(version_key(prefix, player)) is not None


async def _len(items: list[Event], n: int) -> bool:
    return len(items) >= n


async def test_a_failed_durable_batch_is_halved_until_the_bad_event_stands_alone(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    calls: list[list[int]] = []

    async def record(ctx: Tx, events: list[Event]) -> None:
        calls.append([e.payload["n"] for e in events])
        await apply_effects(ctx, events)

    registry = HandlerRegistry()
    registry.register(EFFECT, record, max_batch=16)
    await commit_events(
        sessions,
        queue,
        [NewEvent(EFFECT, 0, START_MS, {"n": n, "fail": n == 5}) for n in range(20)],
    )
    workers.start(queue, registry, 0, sessions=sessions)
    await eventually(lambda: _at_least(sessions, "processed", 19))
    await at_rest(queue, 1)  # the bad one waits for its retry, the rest were acked
    sizes = [(c[0], len(c)) for c in calls]
    # max_batch: 16 + 4; the failing 16 is halved: 8 (bad) -> 4 ok, 4 (bad) -> 2 (bad) -> 1, 1
    assert sizes == [
        (0, 16),
        (0, 8),
        (0, 4),
        (4, 4),
        (4, 2),
        (4, 1),
        (5, 1),
        (6, 2),
        (8, 8),
        (16, 4),
    ]
    c = await counts(sessions)
    assert c == {"processed": 19, "effects": 19, "distinct": 19, "pending": 1}


async def test_writes_kept_for_the_commit_go_with_the_handlers_batch(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """``write_at_commit`` rows commit with the batch; a requirement that touches no row
    (``require_at_commit``) fails the batch, which rolls back and runs again."""
    claimed: list[int] = []
    requirement = (
        update(effects)
        .where(effects.c.village_id == bindparam("wanted"))
        .values(village_id=effects.c.village_id)
        .returning(effects.c.row_id)
    )

    async def arrive(ctx: Tx, events: list[Event]) -> None:
        for e in events:
            claimed.append(e.id)
            ctx.write_at_commit(insert(effects), {"event_id": e.id, "village_id": e.village_id})
            if e.payload.get("needs"):  # holds once the first event's row is there
                ctx.require_at_commit(requirement, {"wanted": e.payload["needs"]})

    registry = HandlerRegistry()
    registry.register("arrive", arrive, retry=RetryPolicy(max_attempts=5, base_ms=10))
    first, second = await commit_events(
        sessions, queue,
        [NewEvent("arrive", 4, START_MS, {"needs": 8}), NewEvent("arrive", 8, START_MS)],
    )  # fmt: skip
    workers.start(queue, registry, 0, sessions=sessions)
    # one batch: the first's requirement fails it (the second's row is not there yet); alone,
    # the second commits and the first waits for its retry
    await eventually(lambda: _attempts(sessions, first.id, 1))
    assert (await counts(sessions))["effects"] == 1
    await clock.advance(1_000)  # the first's next try holds
    await eventually(lambda: _at_least(sessions, "processed", 2))
    async with sessions() as session:
        rows = sorted(await session.execute(select(effects.c.event_id, effects.c.village_id)))
    assert rows == sorted([(first.id, 4), (second.id, 8)])
