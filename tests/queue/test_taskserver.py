"""The task server in-process: burst runs, wake-ups without polling, metrics, clean stop."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import urllib.request
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis
from sqlalchemy import event
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.pool import Pool

from common import ids
from common.clock import SYSTEM_CLOCK, ManualClock
from common.embedded_redis import free_port
from common.fastredis import FastRedis, Script
from common.node_lease import NODE_COOLDOWN_MS, node_keys
from common.queue import Event, EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.queue.eventqueue import _SCHEDULE
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from common.settings import Settings
from common.snapshot_versions import _BUMP, version_key
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.leases import LeaseManager
from gameserver.taskserver import TaskServer
from tests.calls import record_calls
from tests.queue.conftest import START_MS, counts, eventually
from tests.queue.testgame import EFFECT, MEMORY
from tests.queue.testgame.handlers import register

FAST = TaskServerConfig(
    partition_lease_ttl_ms=1_000,
    partition_heartbeat_ms=100,
    marker_check_ms=100,
    stats_every_s=0.1,
    max_idle_ms=60_000,
)


@pytest.fixture
def small(settings: Settings) -> Settings:
    return settings.model_copy(update={"queue_partitions": 4, "gameserver_metrics_port": 0})


def _registry() -> HandlerRegistry:
    registry = HandlerRegistry()
    builtin.register(registry)
    register(registry)
    return registry


@pytest.fixture
async def run_server() -> AsyncIterator[Callable[[TaskServer], asyncio.Task[None]]]:
    running: list[tuple[TaskServer, asyncio.Task[None]]] = []

    def start(server: TaskServer) -> asyncio.Task[None]:
        task = asyncio.create_task(server.run())
        running.append((server, task))
        return task

    yield start
    for server, task in running:
        server.stop()
        await asyncio.wait_for(task, 15)


async def test_burst_runs_what_is_due_and_returns(
    small: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    clock: ManualClock,
) -> None:
    queue = make_queue(partitions=4)
    async with sessions() as session, session.begin():
        durable = await add_durable_events(
            session,
            [NewEvent(EFFECT, v, START_MS - v) for v in range(40)],
            clock=clock,
            ids=queue.ids,
        )
    await queue.index(durable[:30])  # ten were never indexed: the burst reconciles them
    await queue.schedule_many([NewEvent(MEMORY, v, START_MS) for v in range(20)])
    await queue.schedule(NewEvent(MEMORY, 1, START_MS + 60_000))  # not due: stays
    server = TaskServer(small, _registry(), clock, config=FAST, burst=True)
    await asyncio.wait_for(server.run(), 30)
    assert await counts(sessions) == {"processed": 40, "effects": 40, "distinct": 40, "pending": 0}
    stats = await queue.stats()
    assert sum(s.depth for s in stats) == 1 and sum(s.inflight for s in stats) == 0
    assert server.metrics.acked.labels("1")._value.get() > 0


async def test_a_sleeping_worker_wakes_for_an_earlier_event(
    small: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    run_server: Callable[[TaskServer], asyncio.Task[None]],
    redis: Redis,
    redis_prefix: str,
) -> None:
    queue = make_queue(partitions=4, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    seen: list[Event] = []

    async def record(ctx: Tx, events: list[Event]) -> None:
        seen.extend(events)

    registry = HandlerRegistry()
    registry.register("rec", record, durable=False)
    await queue.schedule(NewEvent("rec", 2, now + 3_600_000))
    server = TaskServer(small, registry, SYSTEM_CLOCK, config=FAST)
    task = run_server(server)
    await asyncio.wait_for(server.started.wait(), 10)
    assert server.wake is not None
    await asyncio.wait_for(server.wake.ready.wait(), 10)

    async def sleeping() -> bool:
        return all(r.worker.wake_before < float("inf") for r in server._workers.values())

    await eventually(sleeping)
    # the worker sleeps for a minute (max_idle_ms): only the wake-up makes it claim this
    await queue.schedule(NewEvent("rec", 2, now, {"now": True}))

    async def ran() -> bool:
        return len(seen) == 1

    await eventually(ran)
    assert seen[0].payload == {"now": True}
    server.stop()
    await asyncio.wait_for(task, 15)
    assert await redis.hgetall(f"{redis_prefix}:{{lease:queue}}:owners") == {}  # handed back


async def test_metrics_are_served(
    small: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    run_server: Callable[[TaskServer], asyncio.Task[None]],
) -> None:
    port = free_port()
    queue = make_queue(partitions=4, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    await queue.schedule_many([NewEvent(builtin.NOOP, v, now) for v in range(8)])
    await queue.schedule(NewEvent(builtin.NOOP, 3, now + 90_000))
    server = TaskServer(
        small.model_copy(update={"gameserver_metrics_port": port}),
        _registry(),
        SYSTEM_CLOCK,
        config=FAST,
    )
    run_server(server)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()

    async def exported() -> bool:
        try:
            text = await asyncio.to_thread(scrape)
        except OSError:
            return False
        return (
            'gameserver_queue_acked_total{partition="0"} 2.0' in text
            and 'gameserver_queue_depth{partition="3"} 1.0' in text
            # each of the 8 events due now ran once, none the one due later
            and "gameserver_event_lateness_seconds_count 8.0" in text
        )

    await eventually(exported)
    text = await asyncio.to_thread(scrape)
    assert 'gameserver_handler_seconds_count{kind="gameserver.noop"}' in text
    assert "gameserver_queue_lag_seconds" in text
    assert 'gameserver_event_lateness_seconds_bucket{le="1.0"}' in text
    assert "gameserver_partitions_held 4.0" in text


async def test_metrics_listen_on_loopback_unless_told(
    small: Settings, run_server: Callable[[TaskServer], asyncio.Task[None]]
) -> None:
    """The endpoint has no authentication: GAMESERVER_METRICS_HOST opens it wider (the
    compose file sets 0.0.0.0 for a scraper in another container)."""
    assert small.gameserver_metrics_host == "127.0.0.1"
    for host in ("127.0.0.1", "0.0.0.0"):
        server = TaskServer(
            small.model_copy(
                update={"gameserver_metrics_port": free_port(), "gameserver_metrics_host": host}
            ),
            _registry(),
            SYSTEM_CLOCK,
            config=FAST,
        )
        task = run_server(server)
        await asyncio.wait_for(server.started.wait(), 10)
        assert server.metrics_server is not None and server.metrics_server.host == host
        server.stop()
        await asyncio.wait_for(task, 15)


async def test_periodic_jobs_plug_into_the_scheduler(
    redis: Redis,  # first: its teardown (deleting the test's keys) runs after the server's
    small: Settings,
    sessions: async_sessionmaker[AsyncSession],
    run_server: Callable[[TaskServer], asyncio.Task[None]],
) -> None:
    ticks: list[int] = []
    started: list[TaskServer] = []

    async def tick() -> None:
        ticks.append(1)

    async def on_start(server: TaskServer) -> None:
        started.append(server)

    server = TaskServer(small, _registry(), SYSTEM_CLOCK, config=FAST)
    server.add_job(tick, 0.05, name="tick")
    server.on_startup(on_start)
    run_server(server)

    async def ticked() -> bool:
        return len(ticks) >= 2

    await eventually(ticked)
    assert started == [server]


async def test_a_database_outage_counts_no_attempt_against_the_events(
    redis: Redis,
    small: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    run_server: Callable[[TaskServer], asyncio.Task[None]],
) -> None:
    queue = make_queue(partitions=4, clock=SYSTEM_CLOCK)
    outage = {"calls": 0}
    ran: list[Event] = []

    async def arrive(ctx: Tx, events: list[Event]) -> None:
        outage["calls"] += 1
        if outage["calls"] <= 3:  # the first calls find the database restarting
            raise OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))
        ran.extend(events)

    registry = HandlerRegistry()
    registry.register("arrive", arrive)
    async with sessions() as session, session.begin():
        events = await add_durable_events(
            session, [NewEvent("arrive", 1, SYSTEM_CLOCK.now_ms()) for _ in range(5)]
        )
    await queue.index(events)
    config = TaskServerConfig(
        partition_lease_ttl_ms=1_000, partition_heartbeat_ms=100, restart_backoff_s=0.05
    )
    server = TaskServer(small, registry, SYSTEM_CLOCK, config=config)
    run_server(server)

    async def all_ran() -> bool:
        return len(ran) == 5

    await eventually(all_ran)
    assert {e.attempts for e in ran} == {0}  # the outage was nobody's fault
    assert sum(s.dead for s in await queue.stats()) == 0
    assert (await counts(sessions))["processed"] == 5


async def test_the_task_server_leases_its_id_node_while_it_runs(
    small: Settings,
    run_server: Callable[[TaskServer], asyncio.Task[None]],
    redis: Redis,
    redis_prefix: str,
) -> None:
    """Follow-up events and the game's rows get ids of a node no other live process of the
    world has (common.node_lease)."""
    server = TaskServer(small, _registry(), SYSTEM_CLOCK, config=FAST)
    task = run_server(server)
    await asyncio.wait_for(server.started.wait(), 10)
    lease = server.node_lease
    assert lease is not None and lease.node is not None
    assert ids.process_node() == lease.node
    assert server.queue is not None and server.queue.ids.node == lease.node
    expiries, owners = node_keys(redis_prefix)
    assert await redis.hget(owners, str(lease.node)) == lease.owner.encode()
    node = lease.node
    server.stop()
    await asyncio.wait_for(task, 15)
    # handed back: free again after a short cooldown
    expiry = await redis.zscore(expiries, str(node))
    assert expiry is not None and expiry <= SYSTEM_CLOCK.now_ms() + NODE_COOLDOWN_MS + 1_000


async def test_partitions_without_a_live_owner_are_named_in_a_warning(
    small: Settings, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Every task server died (or none ever started): nobody runs those partitions' events.
    A server that sees partitions nobody holds for a few seconds says which."""
    server = TaskServer(small, _registry())
    # a member of the partition group that holds nothing: the four partitions are orphans
    server.leases = LeaseManager(redis, prefix=small.redis_prefix, group="queue", count=4)
    caplog.set_level(logging.WARNING, logger="gameserver.taskserver")
    await server._check_owners(100.0)  # the first look starts the count
    assert not caplog.records and server.metrics.unowned._value.get() == 4
    await server._check_owners(106.0)
    [warning] = [r.getMessage() for r in caplog.records]
    assert "partitions [0, 1, 2, 3] have had no live task server for 6 s" in warning
    await server.leases.heartbeat()  # now it holds them all
    await server._check_owners(107.0)
    assert server.metrics.unowned._value.get() == 0


async def test_a_task_server_that_cannot_start_fails_a_wait_at_once(
    settings: Settings, small: Settings
) -> None:
    """Why the end-to-end test waited 60 s for a raid beside a ``make run`` world: its task
    server could not bind the default metrics port (that world had it), ended at start,
    and the test waited for a march no server would run. Test worlds bind no fixed port
    now, and a wait names the server that ended instead of timing out."""
    assert settings.gameserver_metrics_port == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = TaskServer(small.model_copy(update={"gameserver_metrics_port": port}), _registry())
        task = asyncio.create_task(server.run(), name="task server")

        async def never() -> bool:
            return False

        with pytest.raises(AssertionError, match="task server ended while waiting: FatalError"):
            await eventually(never, 60, alive=[task])


async def test_busy_workers_keep_their_pooled_connections(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    clock: ManualClock,
) -> None:
    """Every partition's worker runs durable batches at once: the task server's pool keeps
    a connection for each instead of opening (and closing on return) an overflow one per
    batch, which on SQLite is a thread and a few PRAGMAs each time."""
    partitions = 16
    world = settings.model_copy(update={"queue_partitions": partitions})
    queue = make_queue(partitions=partitions)
    async with sessions() as session, session.begin():
        durable = await add_durable_events(
            session,
            [NewEvent(EFFECT, v, START_MS - 1_000 + i) for i in range(20) for v in range(48)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index(durable)
    opened = out = peak = 0

    def connected(*_: object) -> None:
        nonlocal opened
        opened += 1

    def checked_out(*_: object) -> None:
        nonlocal out, peak
        out += 1
        peak = max(peak, out)

    def checked_in(*_: object) -> None:
        nonlocal out
        out -= 1

    hooks = (("connect", connected), ("checkout", checked_out), ("checkin", checked_in))
    for name, hook in hooks:
        event.listen(Pool, name, hook)
    try:
        config = dataclasses.replace(FAST, batch_size=4, claim_ahead_ms=0)
        server = TaskServer(world, _registry(), clock, config=config, burst=True)
        await asyncio.wait_for(server.run(), 60)
    finally:
        for name, hook in hooks:
            event.remove(Pool, name, hook)
    assert await counts(sessions) == {
        "processed": 960, "effects": 960, "distinct": 960, "pending": 0,
    }  # fmt: skip
    # a connection opened only when all the others were in use: none was thrown away
    assert opened <= peak


async def test_batches_pay_no_pre_ping(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pre-ping is three round trips per checkout and a batch checks out twice: a flow of
    one-event batches paid more for pings than for its events. A closed connection is
    replaced at checkout without one (``db.engine``)."""
    pings = record_calls(monkeypatch, DefaultDialect, "_do_ping_w_event")
    world = settings.model_copy(update={"queue_partitions": 4})
    queue = make_queue(partitions=4)
    async with sessions() as session, session.begin():
        durable = await add_durable_events(
            session, [NewEvent(EFFECT, v, START_MS - 1_000 + v) for v in range(12)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index(durable)
    config = dataclasses.replace(FAST, batch_size=1, claim_ahead_ms=0)
    server = TaskServer(world, _registry(), clock, config=config, burst=True)
    pings.clear()  # the task server's own, not the test's engine's
    await asyncio.wait_for(server.run(), 60)
    assert len(pings) == 0
    assert await counts(sessions) == {"processed": 12, "effects": 12, "distinct": 12, "pending": 0}


async def test_a_batch_bumps_versions_and_indexes_follow_ups_on_the_pipelined_connection(
    small: Settings,
    sessions: async_sessionmaker[AsyncSession],
    make_queue: Callable[..., EventQueue],
    clock: ManualClock,
    redis: Redis,
    redis_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After each batch the task server bumps the touched players' snapshot versions and
    indexes the events it scheduled; both go out on its ``FastRedis`` connection (through
    redis-py's client, the bump took as much of the task server's CPU as a game handler)."""
    sent = record_calls(monkeypatch, FastRedis, "evalsha")  # (client, script, keys, args)

    async def arrive(ctx: Tx, events: list[Event]) -> None:
        for e in events:
            ctx.touch_players([100 + e.village_id])
            ctx.schedule("later", e.village_id, ctx.now_ms + 60_000)

    registry = _registry()
    registry.register("arrive", arrive)
    registry.register("later", arrive)
    queue = make_queue(partitions=4)
    async with sessions() as session, session.begin():
        durable = await add_durable_events(
            session, [NewEvent("arrive", v, START_MS - 10) for v in range(6)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index(durable)
    server = TaskServer(small, registry, clock, config=FAST, burst=True)
    await asyncio.wait_for(server.run(), 30)
    for player in range(100, 106):
        assert await redis.get(version_key(redis_prefix, player)) is not None
    stats = await queue.stats()
    assert sum(s.depth for s in stats) == 6  # the follow-ups, indexed, due in a minute
    # both on the pipelined connection
    assert {Script(_BUMP).sha, Script(_SCHEDULE.text).sha} <= {script.sha for _, script, *_ in sent}
