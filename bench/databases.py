"""Databases the benchmarks own: created fresh, marked, and never someone else's.

A bench database carries a ``bench_owner`` table. An existing database without
it is refused with a clear message, so a typo cannot wipe a real world.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from common.errors import FatalError, UnreachableError
from common.settings import Settings, load_settings
from db.engine import create_engine
from db.migrate import upgrade

DEFAULT_PG_ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
BENCH_DIR = Path("var/bench")


@dataclass
class BenchDatabase:
    settings: Settings
    engine: AsyncEngine
    kind: str
    name: str

    async def dispose(self) -> None:
        await self.engine.dispose()


def check_disk(path: Path, needed_bytes: int, what: str) -> None:
    path = path if path.exists() else Path("/")
    free = shutil.disk_usage(path).free
    if needed_bytes > free * 0.8:
        raise FatalError(
            f"{what} needs about {needed_bytes / 2**30:.1f} GiB but {path} has "
            f"{free / 2**30:.1f} GiB free: use a smaller size"
        )


async def _pg_exists_and_owned(admin: AsyncEngine, name: str, url: str) -> tuple[bool, bool]:
    async with admin.connect() as conn:
        found = await conn.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
        )
        if found.first() is None:
            return False, False
    probe = create_async_engine(url)
    try:
        async with probe.connect() as conn:
            owned = await conn.execute(text("SELECT to_regclass('bench_owner') IS NOT NULL"))
            return True, bool(owned.scalar())
    finally:
        await probe.dispose()


async def fresh_database(
    kind: str,
    name: str,
    redis_url: str,
    pg_admin_url: str = DEFAULT_PG_ADMIN_URL,
    **overrides: object,
) -> BenchDatabase:
    """Create (or re-create, if it is a bench database) an empty migrated database."""
    if kind == "postgresql":
        admin = create_async_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
        url = make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
        try:
            try:
                exists, owned = await _pg_exists_and_owned(admin, name, url)
            except OSError as exc:
                raise UnreachableError(f"--pg-admin-url: cannot connect: {exc}") from None
            if exists and not owned:
                raise FatalError(
                    f"database {name!r} exists and is not a bench database; pick another --db-name"
                )
            async with admin.connect() as conn:
                await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await admin.dispose()
    elif kind == "sqlite":
        path = BENCH_DIR / f"{name}.db"
        if path.exists():
            probe = create_async_engine(f"sqlite+aiosqlite:///{path}")
            try:
                async with probe.connect() as conn:
                    marker = await conn.execute(
                        text("SELECT count(*) FROM sqlite_master WHERE name = 'bench_owner'")
                    )
                    if not marker.scalar():
                        raise FatalError(f"{path} exists and is not a bench database; remove it")
            finally:
                await probe.dispose()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite+aiosqlite:///{path}"
    else:
        raise FatalError(f"--db must be sqlite or postgresql, not {kind!r}")
    settings = load_settings(database_url=url, redis_url=redis_url, **overrides)
    engine = create_engine(settings)
    await upgrade(engine, settings)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE bench_owner (created TEXT)"))
    return BenchDatabase(settings, engine, kind, name)


async def drop_database(db: BenchDatabase, pg_admin_url: str = DEFAULT_PG_ADMIN_URL) -> None:
    await db.dispose()
    if db.kind == "postgresql":
        admin = create_async_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
        try:
            async with admin.connect() as conn:
                await conn.execute(text(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)'))
        finally:
            await admin.dispose()
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{BENCH_DIR / db.name}.db{suffix}").unlink(missing_ok=True)
