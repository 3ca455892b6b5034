"""Tick capacity: our shard UPDATE beside a bare UPDATE of the same rows, full rotations."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Update, text
from sqlalchemy.ext.asyncio import AsyncEngine
from tqdm import tqdm

from bench import report
from bench.databases import check_disk, drop_database, fresh_database
from bench.host import db_version, load_average
from bench.report import percentiles
from common.amounts import SCALE
from db.stock import Stocks
from gameapi.loading import load_game
from gameapi.stocks import stocks_of

START_MS = 1_700_000_000_000
BYTES_PER_VILLAGE = {"postgresql": 700, "sqlite": 250}  # hot row + index, with free space
TICK_TARGETS = {"ratio_to_bare": 0.8, "postgresql": 5_000_000, "sqlite": 1_000_000}


@dataclass
class TickFigures:
    villages: int
    shards: int
    rotations: int
    ours_s: list[float] = field(default_factory=list)
    bare_s: list[float] = field(default_factory=list)
    # our shard statement alone, as literal SQL on the driver: no horizon, no held
    # villages, no SQLAlchemy; tells the framework's cost from the rule's arithmetic
    rule_s: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        ours, bare = percentiles(self.ours_s), percentiles(self.bare_s)
        per_shard = self.villages / self.shards
        ours_rate = sum(self.rows) / max(sum(self.ours_s), 1e-9)
        bare_rate = sum(self.rows) / max(sum(self.bare_s), 1e-9)
        rule_rate = sum(self.rows) / max(sum(self.rule_s), 1e-9)
        return {
            "villages": self.villages,
            "shards": self.shards,
            "rotations": self.rotations,
            "shard_seconds": ours,
            "bare_shard_seconds": bare,
            "villages_per_s": ours_rate,
            "bare_villages_per_s": bare_rate,
            "ratio_to_bare": ours_rate / max(bare_rate, 1e-9),
            "rule_shard_seconds": percentiles(self.rule_s),
            "rule_villages_per_s": rule_rate,
            "ratio_to_rule": ours_rate / max(rule_rate, 1e-9),
            # linear in rows per shard: the world size at which a shard's p99 reaches 1 s
            "projected_max_villages_p99_under_1s": int(
                self.shards * per_shard / max(ours["p99"], 1e-9)
            ),
        }


async def populate(engine: AsyncEngine, villages: int, shards: int, stocks: Stocks) -> None:
    """Insert ``villages`` hot rows, each shard's rows together (the world generator's layout).

    Stocks start between 100 and 500 of 800 units, as in a world that has been running:
    rows of all-zero stocks would grow every record on the first rotation, which SQLite
    cannot rewrite in place, and the figure would measure that once-only cost.
    """
    cap = 800 * SCALE
    stock = f"(100 + g % 400) * {SCALE}"
    rates = [
        "30 + g % 7" if n == 0 else "10 - g % 25" if r.may_decline else "30"
        for n, r in enumerate(stocks.resources)
    ]
    values = [stock] * len(stocks.names) + rates + [str(cap)] * len(stocks.caps)
    select_rows = (
        f"SELECT g, g % {shards}, {START_MS}, {', '.join(values)} "
        f"FROM series ORDER BY g % {shards}, g"
    )
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(
                text(f"WITH series AS (SELECT generate_series(1, {villages}) AS g) "
                     f"INSERT INTO village_stock {select_rows}")
            )  # fmt: skip
        else:
            await conn.execute(
                text(f"WITH RECURSIVE series(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM series "
                     f"WHERE g < {villages}) INSERT INTO village_stock {select_rows}")
            )  # fmt: skip
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("VACUUM ANALYZE village_stock"))


async def _alone(engine: AsyncEngine, statement: Update | str) -> None:
    """Run one statement in its own transaction, committed like a tick's (no WAL wait)."""
    async with engine.connect() as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            await conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
        if isinstance(statement, str):
            await conn.exec_driver_sql(statement)
        else:
            await conn.execute(statement)


async def _bare(engine: AsyncEngine, stocks: Stocks, shard: int, now_ms: int) -> None:
    await _alone(engine, stocks.bare_tick_statement(shard, now_ms))


async def _rule(engine: AsyncEngine, stocks: Stocks, shard: int, now_ms: int) -> float:
    """Run our shard statement as literal SQL the way ``_bare`` runs its own; returns the
    seconds (compiling it is left out)."""
    statement = stocks.tick_statement(shard, now_ms, engine.dialect.name)
    sql = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    started = time.perf_counter()
    await _alone(engine, sql)
    return time.perf_counter() - started


async def run_rotations(
    engine: AsyncEngine, villages: int, shards: int, rotations: int, stocks: Stocks
) -> TickFigures:
    figures = TickFigures(villages, shards, rotations)
    now = START_MS
    with tqdm(total=shards * rotations, desc="tick shards", unit="shard") as progress:
        for rotation in range(rotations):
            for shard in range(shards):
                now += 1000
                # rotate which runs first, so none gets the warmer cache every time
                turn = (rotation * shards + shard) % 3
                order = (("ours", "bare", "rule") * 2)[turn : turn + 3]
                for i, which in enumerate(order):
                    at = now + i
                    started = time.perf_counter()
                    if which == "ours":
                        async with engine.connect() as conn:
                            rows = (await stocks.tick_shard(conn, shard, at)).rows
                        figures.ours_s.append(time.perf_counter() - started)
                        figures.rows.append(rows)
                    elif which == "bare":
                        await _bare(engine, stocks, shard, at)
                        figures.bare_s.append(time.perf_counter() - started)
                    else:
                        figures.rule_s.append(await _rule(engine, stocks, shard, at))
                progress.update()
    return figures


async def tick_bench(
    villages: int,
    shards: int,
    rotations: int,
    db: str,
    db_name: str,
    pg_admin_url: str,
    redis_url: str,
    out: Path,
) -> dict[str, Any]:
    data_dir = Path("/var/lib/postgresql" if db == "postgresql" else "var")
    check_disk(data_dir, villages * BYTES_PER_VILLAGE[db], f"a tick bench of {villages:,} villages")
    database = await fresh_database(db, db_name, redis_url, pg_admin_url)
    try:
        report.console.print(f"populating {villages:,} villages on {db} ...")
        stocks = stocks_of(load_game(database.settings.game))
        await populate(database.engine, villages, shards, stocks)
        load_at_start = load_average()
        figures = await run_rotations(database.engine, villages, shards, rotations, stocks)
        version = await db_version(database.engine)
    finally:
        await drop_database(database, pg_admin_url)
    summary = figures.summary()
    ours, bare = summary["shard_seconds"], summary["bare_shard_seconds"]
    rows = [
        ["our tick (s/shard)", *ours.values(), summary["villages_per_s"]],
        ["bare UPDATE (s/shard)", *bare.values(), summary["bare_villages_per_s"]],
        ["our statement as raw SQL", *summary["rule_shard_seconds"].values(),
         summary["rule_villages_per_s"]],
    ]  # fmt: skip
    title = f"tick: {villages:,} villages, {shards} shards, {rotations} rotations on {db}"
    report.print_table(title, rows, ["", "p50", "p90", "p99", "max", "villages/s"])
    projected = summary["projected_max_villages_p99_under_1s"]
    report.console.print(
        f"ratio to bare UPDATE: {summary['ratio_to_bare']:.2f}; to our statement as raw "
        f"SQL: {summary['ratio_to_rule']:.2f}; projected villages per "
        f"{shards}-shard rotation with shard p99 < 1 s: {projected:,}"
    )

    def draw(ax: Any) -> None:
        ax.plot([t * 1000 for t in figures.ours_s], label="our tick", linewidth=0.8)
        ax.plot([t * 1000 for t in figures.bare_s], label="bare UPDATE", linewidth=0.8)
        ax.plot([t * 1000 for t in figures.rule_s], label="our statement, raw", linewidth=0.8)
        ax.set_xlabel("shard tick (in order)")
        ax.set_ylabel("duration (ms)")
        ax.set_title(f"tick duration per shard: {villages:,} villages / {shards} shards ({db})")
        ax.legend()

    summary["plot"] = str(report.save_plot(out, f"tick_{db}", draw))
    machine = report.machine_info(
        {"database": version, "loadavg_at_start": load_at_start, "loadavg_at_end": load_average()}
    )
    summary["json"] = str(
        report.save_json(out, f"tick_{db}", {"machine": machine, "db": db, **summary})
    )
    return summary
