"""Alembic migrations, run programmatically so no alembic.ini needs to be found.

The framework's chain (``db/migrations/versions``) and the game's branch (its
``Game.migrations`` directory, labelled with the game's name and depending on a
framework revision) are one script directory: ``upgrade`` runs ``heads``, so the
framework's revisions and then the game's are applied.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import to_tuple
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from common.errors import MigrationError
from common.settings import Settings

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
FRAMEWORK_VERSIONS = MIGRATIONS_DIR / "versions"


def game_migrations_of(settings: Settings) -> Path | None:
    """The Alembic versions directory of the game ``GAME`` names (None: it has no tables)."""
    from gameapi.loading import load_game  # the loader imports the game, which imports db

    return load_game(settings.game).migrations


def migration_locations(game_migrations: Path | None) -> list[Path]:
    """The version directories: the framework's, then the game's (if it has tables)."""
    return (
        [FRAMEWORK_VERSIONS] if game_migrations is None else [FRAMEWORK_VERSIONS, game_migrations]
    )


def alembic_config(settings: Settings, game_migrations: Path | None = None) -> Config:
    """``game_migrations``: the game's versions directory (None: that of the game ``GAME``
    names, from ``load_game``)."""
    if game_migrations is None:
        game_migrations = game_migrations_of(settings)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    locations = migration_locations(game_migrations)
    config.set_main_option("version_locations", os.pathsep.join(str(p) for p in locations))
    config.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return config


def head_revisions(settings: Settings, game_migrations: Path | None = None) -> set[str]:
    return set(_script(settings, game_migrations).get_heads())


def head_revision(settings: Settings, game_migrations: Path | None = None) -> str:
    """The heads the code needs, as one comma-separated string (for messages)."""
    return ",".join(sorted(head_revisions(settings, game_migrations)))


async def _run(engine: AsyncEngine, config: Config, step: Callable[[Config], None]) -> None:
    """Run an Alembic command on one connection, in one transaction.

    On SQLite, batch mode alters a table by copying it and dropping the old one; with
    foreign keys enforced that DROP would cascade (a player's reports deleted, their
    villages orphaned). So they are off while it runs (the pragma only takes effect
    outside a transaction), and checked before the commit.
    """

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        step(config)

    async with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            await conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            await conn.commit()
        try:
            async with conn.begin():
                await conn.run_sync(run)
                if sqlite:
                    broken = (await conn.exec_driver_sql("PRAGMA foreign_key_check")).all()
                    if broken:
                        raise MigrationError(f"the migration broke foreign keys: {broken[:5]}")
        finally:
            if sqlite:
                await conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                await conn.commit()


async def upgrade(
    engine: AsyncEngine,
    settings: Settings,
    revision: str = "heads",
    game_migrations: Path | None = None,
) -> None:
    config = alembic_config(settings, game_migrations)

    def step(c: Config) -> None:
        command.upgrade(c, revision)
        if revision == "heads":
            _add_declared_stock_columns(c.attributes["connection"], settings)

    await _run(engine, config, step)


def _add_declared_stock_columns(connection: Connection, settings: Settings) -> None:
    """Add the ``village_stock`` columns of the game's declared resources that the table
    lacks: a game without tables of its own needs no Alembic branch for its stocks (a
    game's branch may add them itself, ``gameapi.migration.add_stock_columns``)."""
    from gameapi.loading import load_game
    from gameapi.migration import add_stock_columns

    context = MigrationContext.configure(connection, opts={"render_as_batch": True})
    add_stock_columns(Operations(context), load_game(settings.game).resources)


async def downgrade(
    engine: AsyncEngine,
    settings: Settings,
    revision: str = "base",
    game_migrations: Path | None = None,
) -> None:
    config = alembic_config(settings, game_migrations)
    await _run(engine, config, lambda c: command.downgrade(c, revision))


def _script(settings: Settings, game_migrations: Path | None) -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config(settings, game_migrations))


def _applied(script: ScriptDirectory, recorded: set[str]) -> set[str]:
    """The heads of what the database has: ``recorded`` (Alembic stores a revision a
    recorded one depends on only implicitly) with every revision they stand on, reduced
    to those no other applied revision follows."""
    seen: set[str] = set()
    stack = list(recorded)
    while stack:
        for rev in script.get_revisions(stack.pop()):
            if rev is None or rev.revision in seen:
                continue
            seen.add(rev.revision)
            stack.extend(to_tuple(rev.down_revision, default=()))
            stack.extend(to_tuple(rev.dependencies, default=()))
    followed = {
        down
        for rev in script.get_revisions(tuple(seen))
        if rev is not None
        for down in to_tuple(rev.down_revision, default=())
    }
    return seen - followed


async def current_revisions(
    engine: AsyncEngine, settings: Settings, game_migrations: Path | None = None
) -> set[str]:
    def read(connection: Connection) -> set[str]:
        return set(MigrationContext.configure(connection).get_current_heads())

    async with engine.connect() as conn:
        recorded = await conn.run_sync(read)
    return _applied(_script(settings, game_migrations), recorded) if recorded else set()


async def current_revision(
    engine: AsyncEngine, settings: Settings, game_migrations: Path | None = None
) -> str | None:
    """The database's heads as one comma-separated string (None: no schema)."""
    heads = await current_revisions(engine, settings, game_migrations)
    return ",".join(sorted(heads)) or None


async def require_current(
    engine: AsyncEngine, settings: Settings, game_migrations: Path | None = None
) -> None:
    """Raise MigrationError unless the database schema is at the code's head revisions."""
    current = await current_revision(engine, settings, game_migrations)
    head = head_revision(settings, game_migrations)
    if current != head:
        state = "has no schema" if current is None else f"is at revision {current}"
        raise MigrationError(
            f"DATABASE_URL: the database {state}, the code needs {head}; run `wgctl migrate`"
        )
