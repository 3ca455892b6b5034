"""Fixtures of the web tier's tests: an app on real Redis and SQLite/PostgreSQL, players."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from common.clock import ManualClock
from common.redis_conn import AnyRedis
from common.settings import Settings
from tests.conftest import delete_prefix
from tests.redis_cluster import local_cluster
from webfront.app import create_app
from webfront.config import Limit, WebConfig
from webfront.passwords import HashParams

TEST_GAME = "tests.web.minigame"
PASSWORD = "correct horse battery"
JSON_HEADERS = {"Content-Type": "application/json"}

# cheap hashes and roomy limits; tests of a limit tighten it with replace()
FAST_CONFIG = WebConfig(
    password_hash=HashParams(memory_kib=256, time_cost=1),
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


# A representative subset of the web tests runs on both Redis topologies (auth and
# sessions, snapshot polls, commands with idempotency and rate limits, login limits):
# ``@ON_BOTH_TOPOLOGIES`` on a test. The others run on the single server only.
# The Redis paths do not depend on the database: on the cluster they run on SQLite only.
ON_BOTH_TOPOLOGIES = pytest.mark.parametrize("redis_topology", ["standalone", "cluster"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the PostgreSQL runs of the cluster variants (CI time; see above)."""
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params: dict[str, Any] = callspec.params if callspec is not None else {}
        cluster_on_pg = params.get("redis_topology") == "cluster" and (
            params.get("db_url") == "postgresql"
        )
        (drop if cluster_on_pg else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def redis_topology() -> str:
    """``standalone`` (the test Redis) or ``cluster`` (a local 3-master Redis Cluster)."""
    return "standalone"


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[list[int]]:
    """The ports of a local 3-master Redis Cluster, started once for the session (only when
    a test runs on it)."""
    with local_cluster() as ports:
        yield ports


def _cluster_url(request: pytest.FixtureRequest) -> str:
    ports: list[int] = request.getfixturevalue("redis_cluster")
    return f"redis://127.0.0.1:{ports[0]}/0"


@pytest.fixture
def web_settings(
    settings: Settings, redis_topology: str, request: pytest.FixtureRequest
) -> Settings:
    changes: dict[str, Any] = {"game": TEST_GAME}
    if redis_topology == "cluster":
        changes["redis_url"] = _cluster_url(request)
    return settings.model_copy(update=changes)


@pytest.fixture
async def redis(
    redis: Redis, redis_topology: str, redis_prefix: str, request: pytest.FixtureRequest
) -> AsyncIterator[AnyRedis]:
    """The test's Redis client, of the topology the test runs on: on the cluster, a cluster
    client, and every key under the test's prefix is removed afterwards (on every master)."""
    if redis_topology != "cluster":
        yield redis
        return
    client = RedisCluster.from_url(_cluster_url(request))
    await client.initialize()  # before concurrent first commands: they would each start it
    yield client
    await delete_prefix(client, redis_prefix)  # type: ignore[arg-type]  # scans every master
    await client.aclose()


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
