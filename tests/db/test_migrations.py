from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from common.errors import MigrationError
from common.settings import Settings, load_settings
from db.engine import create_engine
from db.migrate import current_revision, downgrade, head_revision, require_current, upgrade
from db.models import Base
from refgame.models import Base as GameBase
from refgame.resources import STOCKS
from tests.conftest import TEST_PG_ADMIN_URL, TEST_REDIS_URL, _admin

DATA = Path(__file__).parent / "data"
OLD_HEAD = "0003"  # the head when the reference game's tables were the framework's


async def test_schema_matches_models(settings, engine) -> None:
    assert await current_revision(engine, settings) == head_revision(settings)
    async with engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        stock_columns = await conn.run_sync(
            lambda c: [col["name"] for col in inspect(c).get_columns("village_stock")]
        )
    assert set(Base.metadata.tables) | set(GameBase.metadata.tables) <= tables
    assert stock_columns == [c.name for c in STOCKS.table.c]


async def test_downgrade_then_upgrade_round_trips(settings, engine) -> None:
    await downgrade(engine, settings, "base")
    with pytest.raises(MigrationError, match="wgctl migrate"):
        await require_current(engine, settings)
    await upgrade(engine, settings)
    await require_current(engine, settings)


async def test_unmigrated_database_is_reported(tmp_path) -> None:
    settings = load_settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/empty.db", redis_url=TEST_REDIS_URL
    )
    engine = create_engine(settings)
    try:
        with pytest.raises(MigrationError, match="has no schema"):
            await require_current(engine, settings)
    finally:
        await engine.dispose()


# ---- a database made at the old head (the code of 54759a6) upgrades without a change


# the game's data, and the places it belongs to (later framework revisions may add to others)
KEPT = ("village_stock", "villages", *sorted(GameBase.metadata.tables))


async def _contents(engine: AsyncEngine, tables: Sequence[str] = KEPT) -> dict[str, Any]:
    """Every row of ``tables``, and their columns and indexes."""

    def schema(c: Any) -> dict[str, Any]:
        i = inspect(c)
        names = sorted(tables)
        return {
            t: (
                [(col["name"], str(col["type"]), col["nullable"]) for col in i.get_columns(t)],
                sorted((x["name"], tuple(x["column_names"])) for x in i.get_indexes(t)),
            )
            for t in names
        }

    async with engine.connect() as conn:
        shape = await conn.run_sync(schema)
        rows = {
            t: sorted(tuple(r) for r in await conn.execute(text(f'SELECT * FROM "{t}"')))
            for t in shape
        }
    return {"schema": shape, "rows": rows}


async def _upgrade_keeps_everything(settings: Settings) -> dict[str, Any]:
    engine = create_engine(settings)
    try:
        assert await current_revision(engine, settings) == OLD_HEAD
        # a table a later revision adds had no data to keep
        kept = sorted(set(KEPT) & set(await _all_tables(engine)))
        before = await _contents(engine, kept)
        await upgrade(engine, settings)
        await require_current(engine, settings)
        after = await _contents(engine, kept)
    finally:
        await engine.dispose()
    # refgame's r0004_settle and r0005_trade give every village a level-0 residence and
    # marketplace: nothing else is new
    added = sorted(set(after["rows"]["buildings"]) - set(before["rows"]["buildings"]))
    assert added == sorted(
        (v[0], kind, 0) for v in before["rows"]["villages"] for kind in ("marketplace", "residence")
    )
    after["rows"]["buildings"] = sorted(set(after["rows"]["buildings"]) - set(added))
    assert after == before
    return after | {"all": await _schema(settings)}


async def _all_tables(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda c: inspect(c).get_table_names())
    return sorted(set(names) - {"alembic_version"})


async def _schema(settings: Settings) -> dict[str, Any]:
    """Every table's columns and indexes (the database is at the heads)."""
    engine = create_engine(settings)
    try:
        await upgrade(engine, settings)
        found = await _contents(engine, await _all_tables(engine))
        return found["schema"]  # type: ignore[no-any-return]
    finally:
        await engine.dispose()


async def test_a_sqlite_world_made_at_the_old_head_upgrades_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(DATA / "world_at_0003.sqlite", path)
    old = load_settings(database_url=f"sqlite+aiosqlite:///{path}", redis_url=TEST_REDIS_URL)
    upgraded = await _upgrade_keeps_everything(old)
    # the data is really there: 80 villages' stocks and their buildings and troops
    assert len(upgraded["rows"]["village_stock"]) == 80
    assert len(upgraded["rows"]["buildings"]) == 800
    assert all(len(upgraded["rows"][t]) >= 1 for t in ("marches", "reports", "troops"))
    engine = create_engine(old)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(select(STOCKS.table).where(STOCKS.c.village_id == 7))).one()
    finally:
        await engine.dispose()
    assert (row.wood, row.clay, row.iron, row.crop) == (
        7_000_021,
        14_000_021,
        21_000_049,
        6_999_881,
    )
    assert row.crop_rate == -7 and row.updated_ms == 1_700_000_000_007
    # a new database gets the same schema from the rewritten history and the game's branch
    new = load_settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/new.sqlite", redis_url=TEST_REDIS_URL
    )
    assert await _schema(new) == upgraded["all"]


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    name = f"wgold_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(TEST_PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_a_postgresql_world_made_at_the_old_head_upgrades_unchanged(
    pg_database: str,
) -> None:
    dump = (DATA / "world_at_0003.pg.sql").read_text()
    loader = create_async_engine(pg_database)
    try:
        async with loader.connect() as conn:
            raw = await conn.get_raw_connection()
            await raw.driver_connection.execute(dump)  # type: ignore[union-attr]
    finally:
        await loader.dispose()
    old = load_settings(database_url=pg_database, redis_url=TEST_REDIS_URL)
    upgraded = await _upgrade_keeps_everything(old)
    assert len(upgraded["rows"]["village_stock"]) == 80
    name = f"wgnew_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        url = make_url(TEST_PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        fresh = await _schema(load_settings(database_url=url, redis_url=TEST_REDIS_URL))
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert fresh == upgraded["all"]


async def test_a_game_without_tables_gets_its_declared_stock_columns(tmp_path: Path) -> None:
    """``examples.harvest`` has no Alembic branch: migrating adds its resource, rate and
    cap columns to the framework's ``village_stock`` (twice is the same as once)."""
    settings = load_settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/harvest.sqlite",
        redis_url=TEST_REDIS_URL,
        game="examples.harvest",
    )
    engine = create_engine(settings)
    try:
        await upgrade(engine, settings)
        await upgrade(engine, settings)
        await require_current(engine, settings)
        async with engine.connect() as conn:
            columns = await conn.run_sync(
                lambda c: [col["name"] for col in inspect(c).get_columns("village_stock")]
            )
            tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    assert columns == ["village_id", "shard", "updated_ms", "grain", "grain_rate", "barn_cap"]
    assert not tables & set(GameBase.metadata.tables)  # no table of the reference game
