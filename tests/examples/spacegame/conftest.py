"""A world of the space game: a database migrated with the framework's chain and the
game's branch (once on SQLite, once on PostgreSQL), and its settings."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from common.settings import Settings, load_settings
from db.engine import create_engine
from db.migrate import upgrade
from tests.conftest import DB_KINDS, TEST_PG_ADMIN_URL, TEST_REDIS_URL, _admin

GAME = "examples.spacegame"


async def _migrate(url: str) -> None:
    settings = load_settings(database_url=url, redis_url=TEST_REDIS_URL, game=GAME)
    engine = create_engine(settings)
    try:
        await upgrade(engine, settings)
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def space_pg_url() -> Iterator[str]:
    name = f"wgsg_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(TEST_PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        asyncio.run(_migrate(url))
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _truncate(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            names = (
                await conn.execute(
                    text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename <> 'alembic_version'"
                    )
                )
            ).scalars()
            await conn.execute(text(f"TRUNCATE {', '.join(names)} RESTART IDENTITY CASCADE"))
    finally:
        await engine.dispose()


@pytest.fixture(params=DB_KINDS)
def space_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'space.db'}"
        asyncio.run(_migrate(url))
        return url
    url = str(request.getfixturevalue("space_pg_url"))
    asyncio.run(_truncate(url))
    return url


@pytest.fixture
def space_settings(space_db_url: str, redis_prefix: str) -> Settings:
    return load_settings(
        database_url=space_db_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        game=GAME,
        world_speed=200,
        map_radius=5,
        tick_shards=4,
        queue_partitions=4,
        gameserver_metrics_port=0,
    )
