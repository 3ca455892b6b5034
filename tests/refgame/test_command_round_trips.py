"""How many PostgreSQL round trips a command costs through the web tier (a regression guard).

A command's speed at 100 connections is bound by its round trips to the database, each
one a wait on a loaded event loop. Counted here per request, on the web tier's own
engine: every statement SQLAlchemy sends (``before_cursor_execute``) plus what asyncpg
sends by itself outside the prepared statements (BEGIN, COMMIT, ROLLBACK and a pool's
pre-ping), read from asyncpg's query logger. The hand-written ceiling
(``bench.web.bare_commands``) makes 6 for a build and 3 for a refused one;
before these were folded, ours made 12, 11 and 13.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import event, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.settings import Settings, load_settings
from db.engine import create_engine
from refgame.models import BuildOrder
from refgame.resources import STOCKS
from tests.conftest import TEST_REDIS_URL
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app
from webfront.state import ENGINE

# the most each command kind may cost; lower them when a change saves a round trip
MAX_BUILD = 7  # BEGIN, one read, spend, order row, event row, idempotency row, COMMIT
MAX_REFUSED_BUILD = 4  # BEGIN, one read, the key's first answer, ROLLBACK
MAX_REFUSED_TRAIN = 4


@dataclass
class RoundTrips:
    """Round trips of the web tier's engine, by what they were."""

    sent: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.sent.clear()

    def statement(self, *args: Any) -> None:
        self.sent.append(" ".join(str(args[2]).split())[:60])

    def driver_query(self, record: Any) -> None:
        # asyncpg's own statements (transactions, pings); SQLAlchemy's go through prepared
        # statements, which this logger does not see, or through executemany, seen above
        if record.args == () or record.query.strip() == ";":
            self.sent.append(record.query.strip()[:60])


def _count(engine: AsyncEngine) -> RoundTrips:
    trips = RoundTrips()
    event.listen(engine.sync_engine, "before_cursor_execute", trips.statement)

    def on_connection(dbapi_connection: Any, *_: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(trips.driver_query)

    # connections made later, and those the pool already holds (the logger set dedupes)
    event.listen(engine.sync_engine.pool, "connect", on_connection)
    event.listen(engine.sync_engine.pool, "checkout", on_connection)
    return trips


@pytest.fixture
def pg_settings(postgres_url: str, redis_prefix: str) -> Settings:
    return load_settings(
        database_url=postgres_url, redis_url=TEST_REDIS_URL, redis_prefix=redis_prefix,
        game="refgame", map_radius=8,
    )  # fmt: skip


@pytest.fixture
async def client(aiohttp_client: Any, pg_settings: Settings, redis: Redis) -> AsyncIterator[Any]:
    app = create_app(pg_settings, ManualClock(1_750_000_000_000), config=replace(FAST_CONFIG))
    yield await aiohttp_client(app)


async def _player(client: Any, name: str) -> tuple[dict[str, str], int]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {"Authorization": f"Bearer {data['token']}"}, int(data["village_id"])


async def _empty_stock(settings: Settings, village_id: int) -> None:
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(STOCKS.table)
                .where(STOCKS.c.village_id == village_id)
                .values(**dict.fromkeys(STOCKS.names, 0), **{f"{r}_rate": 0 for r in STOCKS.names})
            )
    finally:
        await engine.dispose()


async def _post(
    client: Any, trips: RoundTrips, path: str, auth: dict[str, str], key: str, body: dict
) -> tuple[int, list[str]]:
    trips.clear()
    resp = await client.post(path, json=body, headers={**auth, "Idempotency-Key": key})
    await resp.read()
    return resp.status, list(trips.sent)


async def test_a_command_costs_few_round_trips(client: Any, pg_settings: Settings) -> None:
    auth, village = await _player(client, "alice")
    poor, poor_village = await _player(client, "bob")
    await _empty_stock(pg_settings, poor_village)
    trips = _count(client.app[ENGINE])
    build = {"village_id": village, "kind": "woodcutter"}
    # the first use of each statement prepares it: a cost paid once per connection
    status, _ = await _post(client, trips, "/api/build", auth, "warm-1", build)
    assert status == 200

    status, sent = await _post(client, trips, "/api/build", auth, "build-1", build)
    assert status == 200, sent
    assert 0 < len(sent) <= MAX_BUILD, sent
    assert sent[-1].rstrip(";") == "COMMIT", sent

    build = {"village_id": poor_village, "kind": "woodcutter"}
    train = {"village_id": poor_village, "unit": "legionnaire", "count": 1}
    auth = poor
    # the first refusal prepares the refusal's statements
    status, sent = await _post(client, trips, "/api/build", auth, "refused-1", build)
    assert status == 409, sent
    status, sent = await _post(client, trips, "/api/build", auth, "refused-2", build)
    assert status == 409, sent
    assert 0 < len(sent) <= MAX_REFUSED_BUILD, sent
    assert not any(s.startswith(("UPDATE", "INSERT", "DELETE")) for s in sent), sent

    status, _ = await _post(client, trips, "/api/train", auth, "refused-3", train)
    status, sent = await _post(client, trips, "/api/train", auth, "refused-4", train)
    assert status == 409, sent
    assert 0 < len(sent) <= MAX_REFUSED_TRAIN, sent
    assert not any(s.startswith(("UPDATE", "INSERT", "DELETE")) for s in sent), sent


async def test_a_command_after_the_server_dropped_the_pool_applies_once(
    client: Any, pg_settings: Settings
) -> None:
    """No pre-ping: the connections a PostgreSQL restart closed are replaced, and the
    command runs once (the same happens to every pooled connection in a restart)."""
    auth, village = await _player(client, "alice")
    build = {"village_id": village, "kind": "woodcutter"}
    status, _ = await _post(client, _count(client.app[ENGINE]), "/api/build", auth, "k1", build)
    assert status == 200
    engine = create_engine(pg_settings)
    try:
        async with engine.connect() as conn:
            dropped = await conn.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            assert dropped and dropped >= 1
        resp = await client.post(
            "/api/build", json=build, headers={**auth, "Idempotency-Key": "k2"}
        )
        assert resp.status == 200, await resp.text()
        async with engine.connect() as conn:
            orders = await conn.scalar(
                select(func.count()).select_from(BuildOrder).where(BuildOrder.village_id == village)
            )
        assert orders == 2
    finally:
        await engine.dispose()
