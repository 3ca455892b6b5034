"""Fixtures of the web tier's tests: an app on real Redis and SQLite/PostgreSQL, players."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from common.clock import ManualClock
from common.settings import Settings
from webfront.app import create_app
from webfront.config import Limit, WebConfig
from webfront.passwords import ScryptParams

TEST_GAME = "tests.web.minigame"
PASSWORD = "correct horse battery"
JSON_HEADERS = {"Content-Type": "application/json"}

# cheap hashes and roomy limits; tests of a limit tighten it with replace()
FAST_CONFIG = WebConfig(
    scrypt=ScryptParams(n=2**10, r=8, p=1),
    login_per_account=Limit(1000, 60_000),
    login_per_account_address=Limit(1000, 60_000),
    login_per_address=Limit(1000, 60_000),
    register_per_address=Limit(1000, 60_000),
    commands_per_player=Limit(1000, 60_000),
)


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
    return ManualClock()


@pytest.fixture
def web_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"game": TEST_GAME})


MakeClient = Callable[..., Awaitable[TestClient]]


@pytest.fixture
def make_client(
    aiohttp_client: Any, web_settings: Settings, clock: ManualClock, redis: Redis
) -> MakeClient:
    """``await make_client(**config_changes)``: a test client of a fresh app."""

    async def make(**changes: Any) -> TestClient:
        app = create_app(web_settings, clock, config=replace(FAST_CONFIG, **changes))
        client: TestClient = await aiohttp_client(app)
        return client

    return make


@pytest.fixture
async def client(make_client: MakeClient) -> TestClient:
    return await make_client()


async def post(
    client: TestClient, path: str, body: Any, headers: dict[str, str] | None = None
) -> Any:
    return await client.post(path, json=body, headers=headers)


RegisterFn = Callable[[str], Awaitable[Player]]


@pytest.fixture
def register(client: TestClient) -> RegisterFn:
    async def make(name: str) -> Player:
        resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
        assert resp.status == 201, await resp.text()
        data = await resp.json()
        client.session.cookie_jar.clear()  # tests send their credentials explicitly
        return Player(name, data["token"], data["player_id"], data["village_id"])

    return make
