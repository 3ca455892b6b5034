from __future__ import annotations

import pytest
from sqlalchemy import inspect

from common.errors import MigrationError
from common.settings import load_settings
from db.engine import create_engine
from db.migrate import current_revision, downgrade, head_revision, require_current, upgrade
from db.models import Base
from tests.conftest import TEST_REDIS_URL


async def test_schema_matches_models(settings, engine) -> None:
    assert await current_revision(engine) == head_revision(settings)
    async with engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert set(Base.metadata.tables) <= tables


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
