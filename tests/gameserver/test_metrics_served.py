"""Every metric the task server's code defines is served on its /metrics, and a partition
it hands back is no longer exported by it."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from common.clock import SYSTEM_CLOCK
from common.embedded_redis import free_port
from common.queue.handlers import HandlerRegistry
from common.settings import Settings, load_settings
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick
from tests.conftest import TEST_REDIS_URL
from tests.gameserver.metric_names import gameserver_families
from tests.queue.conftest import eventually

FAST = TaskServerConfig(
    partition_lease_ttl_ms=1_000,
    partition_heartbeat_ms=100,
    marker_check_ms=100,
    stats_every_s=0.1,
)
PER_PARTITION_GAUGES = (
    "gameserver_queue_depth",
    "gameserver_queue_ready",
    "gameserver_queue_inflight",
    "gameserver_queue_dead_depth",
    "gameserver_queue_lag_seconds",
)


def scrape(port: int) -> dict[str, list[tuple[str, dict[str, str]]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        family.name: [(s.name, s.labels) for s in family.samples]
        for family in text_string_to_metric_families(text)
    }


@pytest.fixture
def world(sqlite_url: str, redis_prefix: str, redis: Redis) -> Settings:
    return load_settings(
        database_url=sqlite_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        queue_partitions=4,
        tick_shards=2,
        gameserver_metrics_port=0,
    )


@pytest.fixture
async def start() -> AsyncIterator[Callable[[TaskServer], asyncio.Task[None]]]:
    running: list[tuple[TaskServer, asyncio.Task[None]]] = []

    def run(server: TaskServer) -> asyncio.Task[None]:
        task = asyncio.create_task(server.run())
        running.append((server, task))
        return task

    yield run
    for server, task in running:
        server.stop()
        await asyncio.wait_for(task, 15)


def _server(settings: Settings, port: int = 0) -> TaskServer:
    registry = HandlerRegistry()
    builtin.register(registry)
    server = TaskServer(
        settings.model_copy(update={"gameserver_metrics_port": port}),
        registry,
        SYSTEM_CLOCK,
        config=FAST,
    )
    ShardedTick(server)  # what `gameserver` runs: the tick's metrics must be served too
    return server


async def test_every_defined_metric_is_on_the_endpoint(
    world: Settings, start: Callable[[TaskServer], asyncio.Task[None]]
) -> None:
    defined = gameserver_families()
    assert {"tick_shard_seconds", "tick_overruns", "tick_villages", "tick_lag_seconds"} <= set(
        defined
    )
    port = free_port()
    task = start(_server(world, port))
    served: dict[str, list[tuple[str, dict[str, str]]]] = {}

    async def all_served() -> bool:
        nonlocal served
        try:
            served = await asyncio.to_thread(scrape, port)
        except OSError:
            return False
        return set(defined) <= set(served) and bool(served["tick_lag_seconds"])

    await eventually(all_served, alive=[task])
    for name, kind in defined.items():
        assert served[name] is not None, name
        assert kind in ("counter", "gauge", "histogram", "summary"), (name, kind)
    # nothing of the task server lands on prometheus_client's default registry, which no
    # endpoint of ours serves
    default = {family.name for family in REGISTRY.collect()}
    assert not default & set(defined)


async def test_released_partitions_are_no_longer_exported(
    world: Settings, start: Callable[[TaskServer], asyncio.Task[None]]
) -> None:
    port = free_port()
    first = _server(world, port)
    first_task = start(first)

    def exported(partitions: set[str]) -> bool:
        families = scrape(port)
        for name in PER_PARTITION_GAUGES:
            labels = {s[1]["partition"] for s in families.get(name, [])}
            if labels != partitions:
                return False
        return True

    async def exports(partitions: set[str]) -> bool:
        try:
            return await asyncio.to_thread(exported, partitions)
        except OSError:
            return False

    await eventually(lambda: exports({"0", "1", "2", "3"}), alive=[first_task])
    second = _server(world)
    second_task = start(second)

    async def shared() -> bool:
        return len(first.held) == 2 and len(second.held) == 2

    await eventually(shared, alive=[first_task, second_task])
    kept = {str(p) for p in first.held}
    await eventually(lambda: exports(kept), alive=[first_task, second_task])
