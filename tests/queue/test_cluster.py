"""The queue on a real local 3-master Redis Cluster (Valkey binary): no CROSSSLOT anywhere."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio.cluster import RedisCluster
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK, ManualClock
from common.queue import Event, EventQueue, NewEvent, RetryPolicy
from common.queue.durable import add_durable_events
from common.queue.handlers import HandlerRegistry
from common.redis_conn import connect_redis
from common.settings import Settings
from common.snapshot_versions import bump_versions, read_version
from db.engine import create_engine, session_factory
from gameserver.config import TaskServerConfig
from gameserver.leases import LeaseManager
from gameserver.taskserver import TaskServer
from gameserver.wake import WakeListener
from tests.queue.conftest import START_MS, counts, eventually
from tests.queue.testgame import EFFECT, MEMORY, reset_effects
from tests.queue.testgame.handlers import register
from tests.redis_cluster import local_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[int]]:
    with local_cluster() as ports:
        yield ports


@pytest.fixture
async def cluster_client(cluster: list[int]) -> AsyncIterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=cluster[0])
    await client.initialize()
    yield client
    await client.aclose()


async def test_queue_operations_on_a_cluster(
    cluster_client: RedisCluster, redis_prefix: str
) -> None:
    clock = ManualClock(START_MS)
    queue = EventQueue(cluster_client, prefix=redis_prefix, partitions=8, clock=clock)
    ports: set[str | int] = set()  # as redis-py types ClusterNode.port
    for p in range(8):
        node = cluster_client.get_node_from_key(queue.keys(p).due)
        assert node is not None
        ports.add(node.port)
    assert len(ports) >= 2  # the partitions really are spread over the masters
    await queue.load_scripts()
    ids = await queue.schedule_many([NewEvent("k", v, START_MS + v % 3) for v in range(40)])
    assert sum(s.depth for s in await queue.stats()) == 40
    assert await queue.cancel(1, ids[1]) is True
    assert await queue.reschedule(2, ids[2], START_MS + 100) is True
    await clock.advance(10)
    claimed: list[int] = []
    for p in range(8):
        first = await queue.claim(p, 2)
        rest = await queue.claim(p, 100, ack=[first.token])
        claimed += [e.id for e in first.events + rest.events]
        if p == 0 and rest.events:
            retried, buried = await queue.retry(
                p, rest.token, [(rest.events[0], "boom")], RetryPolicy(max_attempts=1)
            )
            assert (retried, buried) == (0, 1)
        if rest.token:
            assert await queue.renew(p, [rest.token], 5_000) == 1
            assert await queue.ack(p, rest.token) is True
    assert sorted(claimed) == sorted(set(ids) - {ids[1], ids[2]})
    [dead] = await queue.dead()
    assert dead.error == "boom" and await queue.find_dead(dead.id) == 0
    assert await queue.requeue_dead(0, dead.id) is True
    again = await queue.claim(0)
    assert [e.id for e in again.events] == [dead.id]
    assert await queue.release(0, again.token) == 1
    await queue.claim(0)
    assert await queue.recover(0) == 1
    assert await queue.index([Event(999, "k", 0, START_MS, 0, {}, 0, True)]) == 1
    assert await queue.missing(0, [999, 5]) == [5]
    assert await queue.cancel(0, 999) is True
    await queue.aclose()
    await _delete(cluster_client, redis_prefix)


async def test_leases_and_wake_ups_on_a_cluster(
    cluster_client: RedisCluster, redis_prefix: str
) -> None:
    lease = LeaseManager(cluster_client, prefix=redis_prefix, group="queue", count=8)
    assert await lease.heartbeat() == frozenset(range(8))
    await lease.release_all()
    listener = WakeListener(cluster_client, redis_prefix)
    task = asyncio.create_task(listener.run())

    class Sleeper:
        wake = asyncio.Event()
        wake_before = float("inf")

    sleepers = {p: Sleeper() for p in range(8)}
    for p, s in sleepers.items():
        s.wake = asyncio.Event()
        listener.attach(p, s)
    await asyncio.wait_for(listener.ready.wait(), 10)
    for s in sleepers.values():
        s.wake.clear()
    queue = EventQueue(cluster_client, prefix=redis_prefix, partitions=8, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    # published from the nodes of partitions 0..7, heard on the listener's node
    async with session_less(queue) as q:
        await q.schedule_many([NewEvent("k", v, now) for v in range(8)])

    async def all_woken() -> bool:
        return all(s.wake.is_set() for s in sleepers.values())

    await eventually(all_woken, 10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await _delete(cluster_client, redis_prefix)


class session_less:
    def __init__(self, queue: EventQueue) -> None:
        self.queue = queue

    async def __aenter__(self) -> EventQueue:
        return self.queue

    async def __aexit__(self, *exc: object) -> None:
        await self.queue.aclose()


async def test_task_server_runs_on_a_cluster(
    cluster: list[int], sqlite_url: str, redis_prefix: str, cluster_client: RedisCluster
) -> None:
    settings = Settings(
        database_url=sqlite_url,
        redis_url=f"redis://127.0.0.1:{cluster[1]}/0",
        redis_prefix=redis_prefix,
        queue_partitions=6,
        gameserver_metrics_port=0,
    )  # type: ignore[call-arg]
    client = await connect_redis(settings)
    assert isinstance(client, RedisCluster)  # detected from the server
    await client.aclose()
    engine = create_engine(settings)
    await reset_effects(engine)
    sessions: async_sessionmaker[AsyncSession] = session_factory(engine)
    queue = EventQueue(cluster_client, prefix=redis_prefix, partitions=6, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    async with sessions() as session, session.begin():
        events = await add_durable_events(
            session, [NewEvent(EFFECT, v, now - 10) for v in range(60)]
        )
    await queue.index(events[:50])  # the rest is found by the reconciler
    await queue.schedule_many([NewEvent(MEMORY, v, now - 10) for v in range(30)])
    registry = HandlerRegistry()
    register(registry)
    config = TaskServerConfig(partition_lease_ttl_ms=1_000, partition_heartbeat_ms=100)
    server = TaskServer(settings, registry, config=config, burst=True)
    await asyncio.wait_for(server.run(), 60)
    assert await counts(sessions) == {"processed": 60, "effects": 60, "distinct": 60, "pending": 0}
    assert sum(s.depth + s.inflight for s in await queue.stats()) == 0
    await queue.aclose()
    await engine.dispose()
    await _delete(cluster_client, redis_prefix)


async def _delete(client: RedisCluster, prefix: str) -> None:
    for node in client.get_primaries():
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*", target_nodes=node)]
        for key in keys:
            await client.delete(key)


async def test_snapshot_versions_bump_across_the_slots_of_a_cluster(
    cluster_client: RedisCluster, redis_prefix: str
) -> None:
    players = list(range(1, 41))  # their version keys land on every master
    await bump_versions(cluster_client, redis_prefix, players, START_MS)
    await bump_versions(cluster_client, redis_prefix, players[:10], START_MS)
    versions = [await read_version(cluster_client, redis_prefix, p, START_MS) for p in players]
    assert versions == [START_MS + 1] * 10 + [START_MS] * 30
