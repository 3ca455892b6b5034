"""The reconciler: DB rows are the truth; Redis data loss (even FLUSHALL) loses no event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK, ManualClock
from common.embedded_redis import EmbeddedRedis
from common.queue import EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.queue.reconciler import Reconciler
from common.settings import Settings
from gameserver.config import TaskServerConfig
from gameserver.taskserver import TaskServer
from tests.queue.conftest import START_MS, counts, eventually
from tests.queue.testgame import EFFECT
from tests.queue.testgame.handlers import register


@pytest.fixture
def own_redis() -> Iterator[EmbeddedRedis]:
    """A private server: FLUSHALL must not touch anybody else's test data."""
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
async def own_client(own_redis: EmbeddedRedis) -> AsyncIterator[Redis]:
    client = Redis.from_url(own_redis.url)
    yield client
    await client.aclose()


async def test_reconcile_indexes_only_what_redis_lacks(
    make_queue: Callable[..., EventQueue],
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
) -> None:
    queue = make_queue(partitions=4)
    async with sessions() as session, session.begin():
        events = await add_durable_events(
            session, [NewEvent(EFFECT, v, START_MS + v) for v in range(25)], clock=clock
        )
    await queue.index(events[:5])
    reconciler = Reconciler(queue, sessions, lambda: range(4), chunk=7)
    assert await reconciler.lost_markers(range(4)) == [0, 1, 2, 3]
    # partitions 0 and 1 hold villages 0, 1, 4, 5, ... 24: 13 events, 3 of them indexed before
    assert await reconciler.reconcile({0, 1}) == 10
    assert await reconciler.lost_markers(range(4)) == [2, 3]
    assert await reconciler.reconcile({0, 1, 2, 3}) == 10
    assert await reconciler.reconcile({0, 1, 2, 3}) == 0
    assert sum(s.depth for s in await queue.stats()) == 25


async def test_flushall_while_events_are_pending_loses_nothing(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    own_redis: EmbeddedRedis,
    own_client: Redis,
) -> None:
    settings = settings.model_copy(
        update={"redis_url": own_redis.url, "queue_partitions": 4, "gameserver_metrics_port": 0}
    )
    queue = EventQueue(own_client, prefix=settings.redis_prefix, partitions=4, clock=SYSTEM_CLOCK)
    due = SYSTEM_CLOCK.now_ms() + 1_500
    async with sessions() as session, session.begin():
        events = await add_durable_events(
            session, [NewEvent(EFFECT, v % 40, due + v % 7) for v in range(300)]
        )
    await queue.index(events)
    registry = HandlerRegistry()
    register(registry)
    config = TaskServerConfig(
        partition_lease_ttl_ms=1_000, partition_heartbeat_ms=100, marker_check_ms=100
    )
    server = TaskServer(settings, registry, config=config)
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 10)
        assert server.reconciler is not None
        reconciler = server.reconciler

        async def marked() -> bool:
            return await reconciler.lost_markers(range(4)) == []

        await eventually(marked)
        assert (await counts(sessions))["processed"] == 0
        await own_client.flushall()  # Redis forgets every pending event, lease and marker

        async def all_ran() -> bool:
            return (await counts(sessions))["processed"] >= 300

        await eventually(all_ran, 30)

        async def drained() -> bool:  # nothing left to run twice: the work is over
            stats = await queue.stats()
            return sum(s.depth + s.inflight for s in stats) == 0

        await eventually(drained, 30)
        assert await counts(sessions) == {
            "processed": 300,
            "effects": 300,
            "distinct": 300,
            "pending": 0,
        }
        assert server.metrics.redis_data_lost._value.get() >= 1
        assert server.metrics.reconciled._value.get() >= 300
    finally:
        server.stop()
        await asyncio.wait_for(task, 15)
        await queue.aclose()


async def test_overdue_sweep_indexes_only_overdue_events_redis_lacks(
    make_queue: Callable[..., EventQueue],
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
) -> None:
    """A command's commit that raced a Redis restart could not index its event."""
    queue = make_queue(partitions=2)
    async with sessions() as session, session.begin():
        events = await add_durable_events(
            session,
            [NewEvent(EFFECT, v, START_MS + 1_000 * v) for v in range(6)],
            clock=clock,
        )
    await queue.index(events[:1])
    reconciler = Reconciler(queue, sessions, lambda: range(2))
    # due by START_MS + 2 s: events 0 (indexed already), 1 and 2
    assert await reconciler.reconcile({0, 1}, due_before=START_MS + 2_000) == 2
    assert sum(s.depth for s in await queue.stats()) == 3
    assert await reconciler.lost_markers(range(2)) == [0, 1]  # a sweep is not a full pass
