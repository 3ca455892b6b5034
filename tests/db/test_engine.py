"""What every PostgreSQL session of the tiers runs with (``db.engine.create_engine``)."""

from __future__ import annotations

from sqlalchemy import text

from common.settings import load_settings
from db.engine import create_engine


async def test_sessions_compile_no_statement_and_keep_long_ones_prepared(
    postgres_url: str,
) -> None:
    engine = create_engine(load_settings(database_url=postgres_url))
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("SHOW jit"))).scalar() == "off"
            # a game's snapshot statement is longer than asyncpg keeps by default (15 KiB)
            long = "SELECT 1 AS one /* " + "x" * 20_000 + " */"
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            for _ in range(2):
                assert await raw.fetchval(long) == 1
            kept = await raw.fetchval(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", long
            )
            assert kept == 1
    finally:
        await engine.dispose()
