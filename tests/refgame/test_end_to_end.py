"""A whole attack through the real tiers: web command -> Redis queue -> task server -> DB."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from common.amounts import to_units
from common.clock import SYSTEM_CLOCK
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from db.engine import create_engine
from db.models import Village
from gameserver import builtin
from gameserver.taskserver import TaskServer
from refgame import handlers as game_handlers
from refgame.battle import verify_report
from refgame.models import March, Report, Troop
from refgame.resources import STOCKS
from refgame.state import add_troops
from tests.queue.conftest import eventually
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app

pytestmark = pytest.mark.slow


@pytest.fixture
def game_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"game": "refgame", "map_radius": 3, "world_speed": 2000, "queue_partitions": 4}
    )


async def test_attack_send_arrive_battle_report_return_home(
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
    engine = create_engine(game_settings)
    registry = HandlerRegistry()
    builtin.register(registry)
    game_handlers.register(registry, game_settings)
    server = TaskServer(game_settings, registry)
    running = asyncio.create_task(server.run(), name="task server")
    try:
        async with engine.begin() as conn, AsyncSession(conn) as session:
            await add_troops(session, alice["village_id"], alice["village_id"], {"imperian": 40})
            await session.flush()
            bob_xy = (
                await session.execute(
                    select(Village.x, Village.y).where(Village.id == bob["village_id"])
                )
            ).one()
        auth = {"Authorization": f"Bearer {alice['token']}"}
        body = {"village_id": alice["village_id"], "kind": "raid", "x": bob_xy.x, "y": bob_xy.y,
                "troops": {"imperian": 40}}  # fmt: skip
        resp = await client.post("/api/march", json=body, headers=auth)
        assert resp.status == 200, await resp.text()
        march_id = (await resp.json())["march_id"]

        async def reports_filed() -> bool:
            async with engine.connect() as conn:
                return len((await conn.execute(select(Report.id))).all()) == 2

        await eventually(reports_filed, 60, alive=[running])
        async with engine.connect() as conn:
            reports = (
                await conn.execute(select(Report.player_id, Report.body).order_by(Report.player_id))
            ).all()
            back = (
                await conn.execute(
                    select(March.kind, March.troops, March.loot).where(March.id == march_id)
                )
            ).one()
        assert [r.player_id for r in reports] == [alice["player_id"], bob["player_id"]]
        assert all(verify_report(r.body) for r in reports)
        battle, loot = reports[0].body["battle"], reports[0].body["loot"]
        assert battle["attacker_won"] and sum(loot.values()) > 0  # bob has no troops
        assert back.kind == "return" and back.loot == loot

        async def troops_home() -> bool:
            async with engine.connect() as conn:
                return (
                    await conn.execute(select(March.id).where(March.id == march_id))
                ).first() is None

        await eventually(troops_home, 60, alive=[running])
        async with engine.connect() as conn:
            home = dict(
                (
                    await conn.execute(
                        select(Troop.unit, Troop.count).where(
                            Troop.village_id == alice["village_id"]
                        )
                    )
                ).all()
            )
            stock = (
                await conn.execute(
                    select(STOCKS.table).where(STOCKS.c.village_id == alice["village_id"])
                )
            ).one()
        assert home == {u: n for u, n in battle["attacker_survivors"].items() if n}
        assert to_units(stock.iron) >= loot["iron"]  # the loot came home (capped by storage)
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, 20)
        await engine.dispose()
