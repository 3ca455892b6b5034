"""Founding a second village through the real tiers: web command -> Redis queue -> task
server -> DB, and the refusals answered with 4xx that change nothing."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from common.clock import SYSTEM_CLOCK
from common.settings import Settings
from db.engine import create_engine
from db.models import ScheduledEvent, Village
from gameapi import handler_registry, load_game
from gameserver import builtin
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick
from refgame.models import Report, SettleMarch, Troop
from refgame.resources import STOCKS
from refgame.state import add_troops
from tests.queue.conftest import eventually
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app

pytestmark = pytest.mark.slow
RADIUS = 3


@pytest.fixture
def game_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"game": "refgame", "map_radius": RADIUS, "world_speed": 2000,
                "queue_partitions": 4, "tick_shards": 2}
    )  # fmt: skip


async def _rows(engine: Any, village_id: int) -> tuple[Any, ...]:
    """What a refused command must leave alone."""
    async with engine.connect() as conn:
        return (
            (await conn.execute(select(func.count()).select_from(Village))).scalar(),
            (await conn.execute(select(func.count()).select_from(SettleMarch))).scalar(),
            (await conn.execute(select(func.count()).select_from(ScheduledEvent))).scalar(),
            sorted(
                (
                    await conn.execute(
                        select(Troop.unit, Troop.count).where(Troop.village_id == village_id)
                    )
                ).all()
            ),
        )


async def test_found_a_second_village_and_refusals(
    aiohttp_client: Any, game_settings: Settings, redis: Redis
) -> None:
    client = await aiohttp_client(
        create_app(game_settings, SYSTEM_CLOCK, config=replace(FAST_CONFIG))
    )
    players = []
    for name in ("alice", "bob"):
        resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
        assert resp.status == 201, await resp.text()
        players.append(await resp.json())
        client.session.cookie_jar.clear()
    alice, bob = players
    auth = {"Authorization": f"Bearer {alice['token']}"}
    engine = create_engine(game_settings)
    registry = handler_registry(load_game("refgame"), game_settings)
    builtin.register(registry)
    server = TaskServer(game_settings, registry)
    ShardedTick(server)  # the per-second tick, as the gameserver command runs it
    running = asyncio.create_task(server.run(), name="task server")
    try:
        async with engine.begin() as conn, AsyncSession(conn) as session:
            await add_troops(session, alice["village_id"], alice["village_id"], {"settler": 3})
            await session.flush()
            taken = {(x, y) for x, y in (await session.execute(select(Village.x, Village.y))).all()}
            bob_xy = (
                await session.execute(
                    select(Village.x, Village.y).where(Village.id == bob["village_id"])
                )
            ).one()
        free = min(
            (x, y)
            for x in range(-RADIUS, RADIUS + 1)
            for y in range(-RADIUS, RADIUS + 1)
            if (x, y) not in taken
        )

        # refused, 4xx, nothing changed
        before = await _rows(engine, alice["village_id"])
        bob_auth = {"Authorization": f"Bearer {bob['token']}"}
        refusals = [
            (
                bob_auth,
                {"village_id": bob["village_id"], "x": free[0], "y": free[1]},
                409,
                "insufficient_troops",
            ),
            (
                auth,
                {"village_id": alice["village_id"], "x": bob_xy.x, "y": bob_xy.y},
                409,
                "field_taken",
            ),
            (auth, {"village_id": alice["village_id"], "x": RADIUS + 1, "y": 0}, 400, "off_map"),
            (auth, {"village_id": bob["village_id"], "x": free[0], "y": free[1]}, 404, None),
            (auth, {"village_id": alice["village_id"], "x": "1", "y": 0}, 422, None),
        ]
        for headers, body, status, code in refusals:
            resp = await client.post("/api/found", json=body, headers=headers)
            assert resp.status == status, await resp.text()
            error = (await resp.json())["error"]
            assert code is None or error["code"] == code
        assert await _rows(engine, alice["village_id"]) == before

        # founded: the settlers march, then the village is there with its own stock
        body = {"village_id": alice["village_id"], "x": free[0], "y": free[1]}
        resp = await client.post("/api/found", json=body, headers=auth)
        assert resp.status == 200, await resp.text()
        sent = await resp.json()
        snap = await (await client.get("/api/snapshot", headers=auth)).json()
        assert snap["villages"][0]["settlers_out"][0]["id"] == sent["settle_id"]

        async def founded() -> bool:
            async with engine.connect() as conn:
                found = await conn.execute(
                    select(Village.id).where(Village.x == free[0], Village.y == free[1])
                )
                return found.first() is not None

        await eventually(founded, 60, alive=[running])
        async with engine.connect() as conn:
            new_id, created = (
                await conn.execute(
                    select(Village.id, Village.created_ms).where(
                        Village.x == free[0], Village.y == free[1]
                    )
                )
            ).one()
            report = (
                await conn.execute(
                    select(Report.body).where(Report.player_id == alice["player_id"])
                )
            ).scalar_one()
        assert created == sent["arrive_ms"] and report["founded"]
        snap = await (await client.get("/api/snapshot", headers=auth)).json()
        mine = {v["id"]: v for v in snap["villages"]}
        assert set(mine) == {alice["village_id"], new_id}
        assert (
            mine[new_id]["stocks"]["wood"]["units"] >= 750
            and mine[new_id]["buildings"]["residence"] == 0
        )
        assert mine[alice["village_id"]]["troops"].get("settler") is None
        assert mine[alice["village_id"]]["settlers_out"] == []

        async def ticked() -> bool:  # the tick of its shard materializes its stock
            async with engine.connect() as conn:
                at = (
                    await conn.execute(
                        select(STOCKS.c.updated_ms).where(STOCKS.c.village_id == new_id)
                    )
                ).scalar()
                return bool(at and at > created)

        await eventually(ticked, 60, alive=[running])
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, 20)
        await engine.dispose()
