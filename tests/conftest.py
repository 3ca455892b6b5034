"""Fixtures with real servers: Redis, PostgreSQL and SQLite.

Each test run creates its own PostgreSQL database (dropped at the end) and each
test its own Redis key prefix, so tests never touch anybody else's data. The
servers are started by ``scripts/ensure-services.sh`` (called by ``make test``);
a test never skips because one is missing: it fails.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from common.settings import Settings, env_variables, load_settings
from db.engine import create_engine
from db.migrate import upgrade

# The tests choose every setting themselves: a shell that exports GAME, REDIS_PREFIX or
# a port for a world of its own must not leak into them (or into their subprocesses).
for _name in env_variables():
    os.environ.pop(_name, None)

# No deadlines: a loaded 2-core machine makes examples slow, and speed is bench/'s business.
hypothesis_settings.register_profile("project", deadline=None)
hypothesis_settings.load_profile("project")

TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TEST_PG_ADMIN_URL = os.environ.get(
    "TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
DB_KINDS = ["sqlite", "postgresql"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with slow tests first, each file whole: on ``make test``'s two workers the
    long runs start at once and the short tests fill the gaps beside them, instead of a
    long run starting last and running alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


async def _admin(sql: str) -> None:
    engine = create_async_engine(TEST_PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


async def _migrate(url: str) -> None:
    settings = load_settings(database_url=url, redis_url=TEST_REDIS_URL)
    engine = create_engine(settings)
    try:
        await upgrade(engine, settings)
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A migrated PostgreSQL database of this test run."""
    name = f"wgtest_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(TEST_PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        asyncio.run(_migrate(url))
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that each test copies."""
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    asyncio.run(_migrate(f"sqlite+aiosqlite:///{path}"))
    return path


def _fresh_sqlite(template: Path, tmp_path: Path) -> str:
    path = tmp_path / "world.db"
    shutil.copy(template, path)
    return f"sqlite+aiosqlite:///{path}"


async def _truncate_pg(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            # every table the migrations made: the framework's and the game's
            names = await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                     "AND tablename <> 'alembic_version'")
            )  # fmt: skip
            tables = ", ".join(f'"{name}"' for (name,) in names)
            await conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        await engine.dispose()


@pytest.fixture(params=DB_KINDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database: once on SQLite, once on PostgreSQL."""
    if request.param == "sqlite":
        return _fresh_sqlite(request.getfixturevalue("sqlite_template"), tmp_path)
    url: str = request.getfixturevalue("pg_url")
    asyncio.run(_truncate_pg(url))
    return url


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    return _fresh_sqlite(sqlite_template, tmp_path)


@pytest.fixture
def postgres_url(pg_url: str) -> str:
    asyncio.run(_truncate_pg(pg_url))
    return pg_url


@pytest.fixture
def redis_prefix() -> str:
    return f"wgt{uuid.uuid4().hex[:10]}"


@pytest.fixture
def settings(db_url: str, redis_prefix: str) -> Settings:
    """This test's world. No fixed port: other worlds on this machine (a ``make run`` on
    9100 and 8080) must not decide whether a test's task server can start."""
    return load_settings(
        database_url=db_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        tick_shards=4,
        gameserver_metrics_port=0,
    )


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings)
    yield engine
    await engine.dispose()


async def delete_prefix(client: Redis, prefix: str) -> None:
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        await client.delete(key)


@pytest.fixture
async def redis(redis_prefix: str) -> AsyncIterator[Redis]:
    """A client of the test Redis; every key under this test's prefix is removed afterwards."""
    client = Redis.from_url(TEST_REDIS_URL)
    yield client
    await delete_prefix(client, redis_prefix)
    await client.aclose()
