"""A tiny game for queue tests: durable events that leave one effect row each.

``effects`` has no unique constraint, so an event applied twice shows up as two
rows: the tests count rows per event id to prove exactly-once effects.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, MetaData, Table, delete
from sqlalchemy.ext.asyncio import AsyncEngine

metadata = MetaData()
effects = Table(
    "qtest_effects",
    metadata,
    Column("row_id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", BigInteger, nullable=False),
    Column("village_id", BigInteger, nullable=False),
)

EFFECT = "test.effect"  # durable: one effect row per event, optional sleep, optional failure
MEMORY = "test.memory"  # in-memory: nothing


async def reset_effects(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
        await conn.execute(delete(effects))
