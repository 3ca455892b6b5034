"""The game's Alembic branch creates exactly its models' tables, comes off cleanly and
goes on again."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from common.settings import Settings
from db.engine import create_engine
from db.migrate import downgrade, upgrade
from examples.spacegame.models import METADATA
from examples.spacegame.state import stocks

GAME_TABLES = {t.name for t in METADATA.sorted_tables}


def _table_of(diff: Any) -> str:
    if isinstance(diff, list):  # modify_*: [(op, schema, table, column, ...)]
        return str(diff[0][2])
    if diff[0] in ("add_column", "remove_column"):  # (op, schema, table, column)
        return str(diff[2])
    item = diff[1]  # a Table, or an Index / constraint of one
    for attribute in ("table", "parent"):
        owner = getattr(item, attribute, None)
        if owner is not None:
            return str(owner.name)
    return str(item.name)


def _differences(conn: Connection) -> list[Any]:
    """What autogenerate would change to make the database match the game's models; the
    framework's tables (not in the game's MetaData) are left out."""
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return [d for d in compare_metadata(context, METADATA) if _table_of(d) in GAME_TABLES]


async def test_models_match_the_branch_which_goes_down_and_up(space_settings: Settings) -> None:
    engine = create_engine(space_settings)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_differences) == []
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            assert tables >= GAME_TABLES
            columns = await conn.run_sync(
                lambda c: {col["name"] for col in inspect(c).get_columns("village_stock")}
            )
            assert {"metal", "crystal_rate", "deuterium_cap"} <= columns
        await downgrade(engine, space_settings, "spacegame@base")
        try:
            async with engine.connect() as conn:
                tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
                assert not GAME_TABLES & tables
                columns = await conn.run_sync(
                    lambda c: {col["name"] for col in inspect(c).get_columns("village_stock")}
                )
                assert not set(stocks().names) & columns
        finally:  # the session's PostgreSQL database serves the next tests: up again
            await upgrade(engine, space_settings)
            async with engine.connect() as conn:
                assert await conn.run_sync(_differences) == []
    finally:
        await engine.dispose()
