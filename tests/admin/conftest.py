"""Fixtures of the operator console's tests: the reference game's web app on real Redis and
SQLite/PostgreSQL, an operator account and players."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.settings import Settings
from db.engine import create_engine
from tests.web.conftest import FAST_CONFIG, JSON_HEADERS, PASSWORD
from webfront.admin.operators import create_operator
from webfront.app import create_app
from webfront.passwords import hash_password

OPERATOR = "ops-anna"
OPERATOR_PASSWORD = "operator secret 42"
START_MS = 1_750_000_000_000


@dataclass
class Player:
    name: str
    token: str
    player_id: int
    village_id: int

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def game_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"game": "refgame", "map_radius": 8})


@pytest.fixture
async def db(game_settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(game_settings)
    yield engine
    await engine.dispose()


@pytest.fixture
async def client(
    aiohttp_client: Any, game_settings: Settings, clock: ManualClock, redis: Redis
) -> TestClient:
    app = create_app(game_settings, clock, config=FAST_CONFIG)
    test_client: TestClient = await aiohttp_client(app)
    return test_client


@pytest.fixture
async def operator_id(db: AsyncEngine) -> int:
    return await create_operator(
        db, OPERATOR, hash_password(OPERATOR_PASSWORD, FAST_CONFIG.password_hash), START_MS
    )


async def operator_login(client: TestClient, name: str = OPERATOR) -> dict[str, str]:
    """Log an operator in; the bearer header of the session (the cookie jar is emptied)."""
    resp = await client.post("/admin/api/login", json={"name": name, "password": OPERATOR_PASSWORD})
    assert resp.status == 200, await resp.text()
    token = (await resp.json())["token"]
    client.session.cookie_jar.clear()
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def ops(client: TestClient, operator_id: int) -> dict[str, str]:
    return await operator_login(client)


RegisterFn = Callable[[str], Awaitable[Player]]


@pytest.fixture
def register(client: TestClient) -> RegisterFn:
    async def make(name: str) -> Player:
        resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
        assert resp.status == 201, await resp.text()
        data = await resp.json()
        client.session.cookie_jar.clear()
        return Player(name, data["token"], data["player_id"], data["village_id"])

    return make


__all__ = ["JSON_HEADERS", "PASSWORD", "Player", "operator_login"]
