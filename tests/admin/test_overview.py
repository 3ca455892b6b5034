"""The world at a glance: counts, queue partitions, health, and the task servers' status
records (events per second, tick, clock offsets) written by a real task server."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.test_utils import TestClient
from prometheus_client import Gauge
from redis.asyncio import Redis

from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue, NewEvent
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.status import StatusPublisher, status_key
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick
from tests.admin.conftest import operator_login
from tests.queue.conftest import eventually
from tests.web.conftest import FAST_CONFIG
from webfront.app import create_app

FAST = TaskServerConfig(partition_lease_ttl_ms=1_000, partition_heartbeat_ms=100, stats_every_s=0.1)


async def test_overview_shows_the_world_and_a_running_task_server(
    aiohttp_client: Any, game_settings: Settings, redis: Redis, operator_id: int
) -> None:
    settings = game_settings.model_copy(update={"queue_partitions": 4})
    # the status records are judged fresh by the web tier's clock: the real one here
    app = create_app(settings, SYSTEM_CLOCK, config=FAST_CONFIG)
    client: TestClient = await aiohttp_client(app)
    ops = await operator_login(client)
    registry = HandlerRegistry()
    builtin.register(registry)
    server = TaskServer(settings, registry, SYSTEM_CLOCK, config=FAST)
    ShardedTick(server)
    StatusPublisher.attach(server, every_s=0.1)
    # the clock-skew check exports its offset as a gauge; the record carries whatever it says
    Gauge("clock_offset_seconds", "offset from Redis TIME", registry=server.metrics.registry).set(
        0.012
    )
    queue = EventQueue(redis, prefix=settings.redis_prefix, partitions=4, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    await queue.schedule_many([NewEvent(builtin.NOOP, v, now) for v in range(20)])
    await queue.schedule(NewEvent(builtin.NOOP, 3, now + 600_000))  # waits: depth 1
    running = asyncio.create_task(server.run())
    overview: dict[str, Any] = {}

    async def shown() -> bool:
        nonlocal overview
        resp = await client.get("/admin/api/overview", headers=ops)
        assert resp.status == 200
        overview = await resp.json()
        servers = overview["task_servers"]
        return bool(
            servers
            and servers[0]["acked_total"] == 20
            and servers[0]["tick"]["avg_ms"] is not None
            and servers[0]["events_per_s"] is not None
        )

    try:
        await eventually(shown, alive=[running])
    finally:
        server.stop()
        await asyncio.wait_for(running, 15)
    [record] = overview["task_servers"]
    assert record["partitions_held"] == 4
    assert record["clock_offsets_ms"]["clock_offset_seconds"] == 12.0
    assert record["tick"]["shards_run"] >= 1 and record["tick"]["p99_ms_at_most"] is not None
    assert record["tick"]["overruns_total"] >= 0
    assert overview["world"] == {
        "players": 0, "villages": 0, "banned": 0, "pending_events": 0, "dead_events_in_db": 0,
    }  # fmt: skip
    assert [p["partition"] for p in overview["queue"]["partitions"]] == [0, 1, 2, 3]
    assert overview["queue"]["depth"] == 1 and overview["queue"]["dead"] == 0
    assert overview["health"]["redis"]["ok"] and overview["health"]["db"]["ok"]
    assert overview["health"]["redis"]["version"]
    # a stopped server takes its record away
    assert not await redis.hexists(status_key(settings.redis_prefix), record["name"])
    await queue.aclose()


async def test_stale_records_are_not_shown(
    client: TestClient, ops: dict[str, str], game_settings: Settings, redis: Redis
) -> None:
    key = status_key(game_settings.redis_prefix)
    await redis.hset(key, "gone:1", '{"name": "gone:1", "updated_ms": 1}')
    await redis.hset(key, "junk", "not json")
    overview = await (await client.get("/admin/api/overview", headers=ops)).json()
    assert overview["task_servers"] == [] and overview["events_per_s"] is None
