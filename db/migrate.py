"""Alembic migrations, run programmatically so no alembic.ini needs to be found."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from common.errors import MigrationError
from common.settings import Settings

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return config


def head_revision(settings: Settings) -> str | None:
    return ScriptDirectory.from_config(alembic_config(settings)).get_current_head()


async def upgrade(engine: AsyncEngine, settings: Settings, revision: str = "head") -> None:
    config = alembic_config(settings)

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    async with engine.begin() as conn:
        await conn.run_sync(run)


async def downgrade(engine: AsyncEngine, settings: Settings, revision: str = "base") -> None:
    config = alembic_config(settings)

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    async with engine.begin() as conn:
        await conn.run_sync(run)


async def current_revision(engine: AsyncEngine) -> str | None:
    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as conn:
        return await conn.run_sync(read)


async def require_current(engine: AsyncEngine, settings: Settings) -> None:
    """Raise MigrationError unless the database schema is at the code's head revision."""
    current = await current_revision(engine)
    head = head_revision(settings)
    if current != head:
        state = "has no schema" if current is None else f"is at revision {current}"
        raise MigrationError(
            f"DATABASE_URL: the database {state}, the code needs {head}; run `wgctl migrate`"
        )
