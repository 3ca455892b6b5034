"""On PostgreSQL the snapshot statement reads each part through its index from the batch's
rows, whatever the planner's statistics say. The world here is analyzed when it held one
player, then 20,000 more join (registrations do not analyze): the plan a read-engine
session keeps must not scan or hash a whole table to find one player's dozen rows (it did:
a snapshot build cost 50 ms of the server's CPU in the capacity bench). It fails with the
parts joined to the villages plainly (a hash join over every building) and without the
session's ``enable_seqscan = off`` (the statistics say every building is in one village)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from common.settings import load_settings
from db.engine import create_engine
from db.worldgen import generate_world
from gameapi.loading import load_game
from gameapi.stocks import stocks_of
from refgame.world import village_template
from webfront.snapshot import read_engine
from webfront.snapshot_build import builder_of

JOINED = 20_000
SERIES = "generate_series(CAST(:a AS BIGINT), CAST(:b AS BIGINT)) g"
FIRST = "CAST(:first AS BIGINT)"


def _literal(value: Any) -> str:
    if isinstance(value, list):
        return "ARRAY[" + ",".join(str(int(v)) for v in value) + "]::BIGINT[]"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


async def _kept_plan(conn: AsyncConnection, player_id: int) -> str:
    """EXPLAIN of the plan a read-engine session keeps for the statement."""
    from webfront.snapshot_build import _params

    builder = builder_of(load_game("refgame"))
    compiled = builder.compiled(conn.dialect)
    types = [
        conn.dialect.type_compiler_instance.process(compiled.binds[name].type)
        for name in compiled.positiontup or ()
    ]
    values = _params(compiled, conn.dialect, [player_id])
    await conn.exec_driver_sql(f"PREPARE snapshot ({', '.join(types)}) AS {compiled.string}")
    rows = await conn.exec_driver_sql(
        f"EXPLAIN EXECUTE snapshot ({', '.join(_literal(v) for v in values)})"
    )
    return "\n".join(row[0] for row in rows)


async def test_every_part_is_read_through_an_index_when_the_statistics_lag(
    postgres_url: str,
) -> None:
    game = load_game("refgame")
    stocks = stocks_of(game)
    settings = load_settings(database_url=postgres_url)
    engine = create_engine(settings)
    try:
        await generate_world(engine, players=1, template=village_template(1.0), shards=4,
                             map_radius=200, stocks=stocks, seed=1)  # fmt: skip
        async with engine.begin() as conn:
            first = (await conn.execute(text("SELECT min(id) FROM villages"))).scalar_one()
            stock_columns = ", ".join(
                "g" if c.name == "village_id" else f"s.{c.name}" for c in stocks.table.c
            )
            for statement in (
                "INSERT INTO players (id, name, name_key, password_hash, created_ms, is_bot) "
                f"SELECT g, 'p' || g, 'p' || g, '!', 0, true FROM {SERIES}",
                "INSERT INTO villages (id, player_id, name, x, y, created_ms) "
                f"SELECT g, g, 'v' || g, g, -g, 0 FROM {SERIES}",
                f"INSERT INTO {stocks.table.name} SELECT {stock_columns} "
                f"FROM {stocks.table.name} s, {SERIES} "
                f"WHERE s.village_id = {FIRST}",
                "INSERT INTO buildings (village_id, kind, level) SELECT g, b.kind, b.level "
                f"FROM buildings b, {SERIES} WHERE b.village_id = {FIRST}",
                "INSERT INTO troops (village_id, home_village_id, unit, count) "
                "SELECT g, g, t.unit, t.count "
                f"FROM troops t, {SERIES} WHERE t.village_id = {FIRST}",
            ):
                await conn.execute(
                    text(statement), {"a": first + 1, "b": first + JOINED, "first": first}
                )
        reads = read_engine(settings, 1)
        try:
            async with reads.connect() as conn:
                plan = await _kept_plan(conn, first + JOINED // 2)
        finally:
            await reads.dispose()
        assert "Seq Scan" not in plan and "Hash" not in plan, plan
    finally:
        await engine.dispose()
