"""GET /api/map with the reference game: owners, bots and each village's population."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.settings import Settings
from db.models import Village
from db.worldgen import generate_world
from refgame.models import Building
from refgame.resources import STOCKS
from refgame.world import STARTING_BUILDINGS, village_template
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app
from webfront.mapview import MapOut

MAP_RADIUS = 8
START_POPULATION = sum(STARTING_BUILDINGS.values())


@pytest.fixture
async def client(aiohttp_client: Any, settings: Settings, redis: Redis) -> Any:
    clock = ManualClock(1_750_000_000_000)
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": MAP_RADIUS})
    app = create_app(game_settings, clock, config=replace(FAST_CONFIG))
    return await aiohttp_client(app)


async def _register(client: Any, name: str) -> dict[str, Any]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {**data, "auth": {"Authorization": f"Bearer {data['token']}"}}


async def _whole_map(client: Any, auth: dict[str, str]) -> MapOut:
    resp = await client.get(f"/api/map?x=0&y=0&radius={MAP_RADIUS}", headers=auth)
    assert resp.status == 200, await resp.text()
    return MapOut.model_validate(await resp.json())


async def test_map_tells_players_from_bots_and_shows_population(
    client: Any, engine: AsyncEngine
) -> None:
    await generate_world(
        engine,
        stocks=STOCKS,
        players=2,
        template=village_template(1.0),
        shards=4,
        map_radius=MAP_RADIUS,
        seed=5,
    )
    alice = await _register(client, "alice")
    window = await _whole_map(client, alice["auth"])
    by_owner = {v.player_name: v for v in window.villages}
    assert len(window.villages) == 3 and by_owner.keys() == {"alice", "bot1", "bot2"}
    mine = by_owner["alice"]
    assert (mine.id, mine.player_id) == (alice["village_id"], alice["player_id"])
    assert not mine.player_is_bot
    assert by_owner["bot1"].player_is_bot and by_owner["bot2"].player_is_bot
    assert {v.size for v in window.villages} == {START_POPULATION}

    # a building's level is the population: a built-up village shows it at once
    async with engine.begin() as conn:
        await conn.execute(
            update(Building)
            .where(Building.village_id == mine.id, Building.kind == "woodcutter")
            .values(level=Building.level + 5)
        )
    window = await _whole_map(client, alice["auth"])
    sizes = {v.player_name: v.size for v in window.villages}
    assert sizes == {
        "alice": START_POPULATION + 5,
        "bot1": START_POPULATION,
        "bot2": START_POPULATION,
    }


async def test_an_abandoned_village_has_no_owner_and_no_buildings(
    client: Any, engine: AsyncEngine
) -> None:
    alice = await _register(client, "alice")
    async with engine.begin() as conn:
        await conn.execute(
            update(Village).where(Village.id == alice["village_id"]).values(player_id=None)
        )
        await conn.execute(delete(Building).where(Building.village_id == alice["village_id"]))
    bob = await _register(client, "bob")
    window = await _whole_map(client, bob["auth"])
    [abandoned] = [v for v in window.villages if v.id == alice["village_id"]]
    assert abandoned.player_id is None and abandoned.player_name is None
    assert not abandoned.player_is_bot and abandoned.size == 0
