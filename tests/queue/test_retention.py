"""Bounded storage: under a steady stream of events, commands and logins, the retention job
keeps processed events, idempotency records and sessions bounded, and never prunes a record
while its event may still be delivered again."""

from __future__ import annotations

from collections.abc import Callable

from redis.asyncio import Redis
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.queue import EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from db.models import IdempotentResponse, Player, PlayerSession, ProcessedEvent
from gameserver.jobs import JobContext
from gameserver.retention import Retention
from refgame import handlers as game_handlers
from refgame.models import Report
from tests.queue.conftest import START_MS, Workers, at_rest, eventually
from tests.queue.testgame import EFFECT, MEMORY
from tests.queue.testgame.handlers import register

HOUR_MS = 3_600_000
PER_HOUR = 20  # events, commands and logins per hour of the stream
HOURS = 36


async def _count(sessions: async_sessionmaker[AsyncSession], model: type) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def test_tables_stay_bounded_under_a_stream(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    workers: Workers,
    clock: ManualClock,
) -> None:
    kept = settings.model_copy(
        update={
            "retention_processed_events_s": 86_400,
            "retention_idempotency_s": 3_600,
            "retention_sessions_s": 0,
            "retention_batch": 7,  # several small batches per run
        }
    )
    queue = make_queue(partitions=2)
    registry = HandlerRegistry()
    register(registry)
    for p in range(2):
        workers.start(queue, registry, p, sessions=sessions)
    retention = Retention(kept, sessions, queue, clock)
    async with sessions() as session, session.begin():
        player_id = (
            await session.execute(
                insert(Player)
                .values(name="p", name_key="p", password_hash="x", created_ms=START_MS, is_bot=True)
                .returning(Player.id)
            )
        ).scalar_one()

    most = {"processed": 0, "idempotent": 0, "sessions": 0}
    pruned_total = 0
    for hour in range(HOURS):
        now = clock.now_ms()
        async with sessions() as session, session.begin():
            events = await add_durable_events(
                session, [NewEvent(EFFECT, v, now) for v in range(PER_HOUR)], clock=clock,
                ids=queue.ids,
            )  # fmt: skip
            await session.execute(
                insert(IdempotentResponse),
                [
                    {"player_id": player_id, "key": f"{hour}-{i}", "request_hash": "h",
                     "status": 200, "body": {}, "created_ms": now}
                    for i in range(PER_HOUR)
                ],
            )  # fmt: skip
            await session.execute(
                insert(PlayerSession),
                [
                    {"token_hash": f"{hour:04d}{i:060d}", "player_id": player_id,
                     "created_ms": now, "expires_ms": now + HOUR_MS // 2, "revoked": False}
                    for i in range(PER_HOUR)
                ],
            )  # fmt: skip
        await queue.index(events)
        expected = (hour + 1) * PER_HOUR - pruned_total

        async def processed(expected: int = expected) -> bool:
            return await _count(sessions, ProcessedEvent) == expected

        await eventually(processed)
        await at_rest(queue, 0)
        await clock.advance(HOUR_MS)
        pruned = await retention.run()
        assert not pruned.skipped
        pruned_total += pruned.rows["processed_events"]
        most["processed"] = max(most["processed"], await _count(sessions, ProcessedEvent))
        most["idempotent"] = max(most["idempotent"], await _count(sessions, IdempotentResponse))
        most["sessions"] = max(most["sessions"], await _count(sessions, PlayerSession))

    # a day's worth (plus the hour in hand) of processed events, an hour of idempotency
    # records, and no expired session: the tables do not grow with the stream
    assert most["processed"] <= PER_HOUR * 25 < HOURS * PER_HOUR
    assert pruned_total >= (HOURS - 25) * PER_HOUR
    assert most["idempotent"] <= PER_HOUR
    assert most["sessions"] == 0


async def test_no_record_goes_while_its_event_may_be_delivered_again(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    clock: ManualClock,
) -> None:
    queue = make_queue(partitions=1)
    retention = Retention(settings, sessions, queue, clock)
    async with sessions() as session, session.begin():
        await session.execute(
            insert(ProcessedEvent).values(event_id=1, kind=MEMORY, village_id=0,
                                          processed_ms=START_MS)
        )  # fmt: skip
    await queue.schedule(NewEvent(MEMORY, 0, START_MS))
    claim = await queue.claim(0)
    assert len(claim.events) == 1
    await clock.advance(settings.retention_processed_events_s * 1000 + HOUR_MS)

    # the worker died holding the batch: nobody has returned it yet
    pruned = await retention.run()
    assert pruned.skipped and "processed_events" not in pruned.rows
    assert await _count(sessions, ProcessedEvent) == 1
    # returned to due, it is due long before the cutoff: still a possible redelivery
    assert await queue.recover(0) == 1
    assert (await retention.run()).skipped
    assert await _count(sessions, ProcessedEvent) == 1

    claim = await queue.claim(0)  # delivered again, and this time acked
    assert await queue.ack(0, claim.token)
    assert (await retention.run()).rows["processed_events"] == 1
    assert await _count(sessions, ProcessedEvent) == 0


async def test_the_reference_game_prunes_old_reports(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    clock: ManualClock,
    redis: Redis,
) -> None:
    kept = settings.model_copy(update={"retention_reports_s": 86_400, "retention_batch": 2})
    now = clock.now_ms()
    async with sessions() as session, session.begin():
        player_id = (
            await session.execute(
                insert(Player)
                .values(name="p", name_key="p", password_hash="x", created_ms=START_MS, is_bot=True)
                .returning(Player.id)
            )
        ).scalar_one()
        await session.execute(
            insert(Report),
            [
                {"player_id": player_id, "kind": "battle", "title": "t", "body": {},
                 "created_ms": now - age_h * HOUR_MS, "is_read": False}
                for age_h in (50, 40, 30, 25, 23, 1)
            ],
        )  # fmt: skip
    registry = HandlerRegistry()
    game_handlers.register(registry, kept)
    [job] = [j for j in registry.jobs if j.name == game_handlers.REPORTS_RETENTION_JOB]
    await job.func(JobContext(kept, redis, sessions, clock, make_queue()))
    async with sessions() as session:
        ages = sorted(
            (now - ms) // HOUR_MS
            for ms in (await session.execute(select(Report.created_ms))).scalars()
        )
    assert ages == [1, 23]
