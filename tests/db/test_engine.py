"""What every PostgreSQL session of the tiers runs with (``db.engine.create_engine``)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine.default import DefaultDialect

from common.settings import load_settings
from db.engine import create_engine
from tests.calls import record_calls


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


async def test_checkouts_pay_no_ping_and_a_closed_connection_is_replaced(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tier's pool (not only the ones that opted out): a pre-ping is three round trips
    per checkout, and a connection the server closed is replaced without one."""
    pings = record_calls(monkeypatch, DefaultDialect, "_do_ping_w_event")
    engine = create_engine(load_settings(database_url=postgres_url), pool_size=1, max_overflow=0)
    try:
        # autocommit: no transaction left to roll back on a connection closed under it
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            first = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar()
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            await raw.close()  # as a server restart leaves it: known closed, back in the pool
        async with engine.connect() as conn:
            again = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar()
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT pg_backend_pid()"))).scalar() == again
        assert again != first and len(pings) == 0
    finally:
        await engine.dispose()
