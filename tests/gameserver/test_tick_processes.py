"""Two task-server processes split the tick shards; kill one, the other takes over."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select

from common.clock import SYSTEM_CLOCK
from common.settings import Settings
from db.worldgen import generate_world
from gameapi import PlaceTemplate
from gameserver.leases import LeaseManager
from gameserver.tick import TICK_LEASE_GROUP
from refgame.resources import STOCKS
from tests.queue.conftest import Servers, eventually, server_env

pytestmark = pytest.mark.slow


@pytest.fixture
def servers() -> Iterator[Servers]:
    running = Servers()
    yield running
    running.stop_all()


TEMPLATE = PlaceTemplate(
    stock={"wood": 10}, rates={"wood": 3600}, caps={"warehouse": 800, "granary": 800}
)


async def test_shards_are_split_and_taken_over(
    settings: Settings, engine, redis: Redis, servers: Servers
) -> None:
    await generate_world(
        engine, stocks=STOCKS, players=40, template=TEMPLATE, shards=4, map_radius=10
    )
    env = server_env(settings, TICK_SHARDS="4")
    first = servers.start(env)
    second = servers.start(env)
    leases = LeaseManager(redis, prefix=settings.redis_prefix, group=TICK_LEASE_GROUP, count=4)

    async def split_between_two() -> bool:
        owners = await leases.owners()
        return len(owners) == 4 and len(set(owners.values())) == 2

    await eventually(split_between_two, 30)

    async def all_ticked_after(ms: int) -> bool:
        async with engine.connect() as conn:
            oldest = (await conn.execute(select(func.min(STOCKS.c.updated_ms)))).scalar()
        return oldest is not None and oldest > ms

    split_at = SYSTEM_CLOCK.now_ms()
    await eventually(lambda: all_ticked_after(split_at), 30)

    first.send_signal(signal.SIGKILL)
    first.wait(10)

    async def survivor_owns_all() -> bool:
        owners = await leases.owners()
        return len(owners) == 4 and len(set(owners.values())) == 1

    await eventually(survivor_owns_all, 30)
    killed_at = SYSTEM_CLOCK.now_ms()
    await eventually(lambda: all_ticked_after(killed_at), 30)  # every shard ticks again
    assert second.poll() is None
