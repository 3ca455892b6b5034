"""The statements every command and every claimed batch run find the earliest healthy
event through its partial index, even before the planner's statistics know the rows (a
fresh world filling its queue): before, they scanned and sorted every pending event."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from common.settings import load_settings
from db.engine import create_engine
from db.events import _EARLIEST, earliest_due

NOW = 1_750_000_000_000


async def test_the_earliest_healthy_event_is_one_index_probe(postgres_url: str) -> None:
    engine = create_engine(load_settings(database_url=postgres_url))
    try:
        async with engine.begin() as conn:
            # statistics of an empty table (a fresh world), then its queue fills
            await conn.execute(text("ANALYZE scheduled_events"))
            await conn.execute(
                text(
                    "INSERT INTO scheduled_events (id, kind, village_id, due_ms, priority, "
                    "payload, created_ms, attempts) SELECT g, 'k', g % 500, "
                    "CAST(:now AS BIGINT) + g, 0, '\\x80'::bytea, CAST(:now AS BIGINT), 0 "
                    "FROM generate_series(1, 20000) g"
                ),
                {"now": NOW},
            )
            horizon = earliest_due(text(str(NOW)))  # type: ignore[arg-type]
            for statement in (_EARLIEST, horizon.select()):
                sql = str(statement.compile(dialect=asyncpg_dialect(),
                                            compile_kwargs={"literal_binds": True}))  # fmt: skip
                plan = "\n".join(r[0] for r in await conn.execute(text("EXPLAIN " + sql)))
                assert "ix_scheduled_events_healthy_due" in plan, plan
                assert "Sort" not in plan and "Seq Scan" not in plan, plan
    finally:
        await engine.dispose()
