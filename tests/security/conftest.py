"""Fixtures of the security tests: the web tier's (a real app on real Redis and
SQLite/PostgreSQL) and a client of the reference game."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis

from common.clock import ManualClock
from common.settings import Settings
from tests.web.conftest import (  # noqa: F401  (fixtures, found by pytest by name)
    FAST_CONFIG,
    PASSWORD,
    client,
    clock,
    make_client,
    redis,
    redis_cluster,
    redis_topology,
    register,
    web_settings,
)
from webfront.app import create_app


@pytest.fixture
async def game_client(aiohttp_client: Any, settings: Settings, redis: Redis) -> Any:  # noqa: F811
    """A client of the reference game's web app (build, train, march, recall)."""
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": 8})
    app = create_app(game_settings, ManualClock(1_750_000_000_000), config=replace(FAST_CONFIG))
    return await aiohttp_client(app)


async def register_game_player(game: Any, name: str) -> dict[str, Any]:
    resp = await game.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data: dict[str, Any] = await resp.json()
    game.session.cookie_jar.clear()
    return {**data, "auth": {"Authorization": f"Bearer {data['token']}"}}
