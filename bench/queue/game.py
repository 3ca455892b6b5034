"""The game run: real march arrivals on a bench database beside durable no-op events."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.host import (
    CpuMeter,
    database_name,
    db_version,
    load_average,
    redis_version,
    warn_if_busy,
)
from bench.prefix import check_bench_prefix, clear_prefix
from bench.queue.constants import TARGETS
from bench.queue.marches import (
    GAME_BYTES_PER_EVENT,
    GAME_BYTES_PER_VILLAGE,
    add_events,
    make_marches,
    radius_for,
    timed_registry,
)
from bench.queue.memory import check_memory
from bench.queue.noop import verdict
from bench.queue.processes import TaskProcesses, due_after_writing, wait_until
from bench.queue.runner import Rates, Recorder, quiet_logs, run_task_server


async def _counts(engine: Any) -> dict[str, int]:
    from sqlalchemy import text

    out = {}
    async with engine.connect() as conn:
        for name, sql in (
            ("processed_marches", "SELECT count(*) FROM processed_events WHERE kind = 'march'"),
            ("reports", "SELECT count(*) FROM reports"),
            ("return_marches", "SELECT count(*) FROM marches WHERE kind = 'return'"),
            ("pending_events", "SELECT count(*) FROM scheduled_events"),
        ):
            out[name] = int((await conn.execute(text(sql))).scalar() or 0)
    return out


async def _game_in_process(
    settings: Any, engine: Any, queue: Any, first: int, villages: int, events: int, batch: int
) -> tuple[float, float, float, Recorder, dict[str, float]]:
    """Both phases on a task server in this process: (floor/s, game/s, game wall s, recorder,
    CPU µs per march arrival)."""
    from tqdm import tqdm

    from bench import report
    from common.queue import NewEvent
    from gameserver.builtin import NOOP_DURABLE
    from refgame.handlers import MARCH

    # the floor: durable no-op events through the same worker path and database
    now = int(time.time() * 1000)
    noop_events = [NewEvent(NOOP_DURABLE, first + i % villages, now) for i in range(events)]
    await add_events(engine, queue, noop_events)
    floor = Recorder(events)
    with tqdm(total=events, desc="durable no-op events", unit="ev", unit_scale=True) as bar:
        floor.progress = bar
        await run_task_server(
            settings, timed_registry(settings, floor, NOOP_DURABLE), floor, burst=True,
            batch=batch, timeout_s=max(300.0, events / 100),
        )  # fmt: skip

    report.console.print(f"sending {events:,} attacks, due now ...")
    await make_marches(engine, queue, first, villages, events)
    await queue.aclose()
    game = Recorder(events)
    cpu = CpuMeter([os.getpid()], database_name(settings))
    cpu_us: dict[str, float] = {}

    def measure_cpu() -> None:  # before the task server closes its connections
        cpu_us.update(cpu.per_event_us(events))

    with tqdm(total=events, desc="march arrivals", unit="ev", unit_scale=True) as bar:
        game.progress = bar
        game_wall = await run_task_server(
            settings, timed_registry(settings, game, MARCH), game, burst=True, batch=batch,
            timeout_s=max(600.0, events / 20), on_done=measure_cpu,
        )  # fmt: skip
    floor_rate = Rates(events, floor.window_s()).per_s
    game_rate = Rates(events, game.window_s()).per_s
    return floor_rate, game_rate, game_wall, game, cpu_us


async def _game_in_processes(
    settings: Any, engine: Any, queue: Any, first: int, villages: int, events: int,
    processes: int, batch: int,
) -> tuple[float, float, dict[str, float]]:  # fmt: skip
    """Both phases on ``processes`` real task servers: (floor seconds, game seconds), each
    from the moment all its events became due until the last was processed."""
    from bench import report
    from common.queue import NewEvent
    from gameserver.builtin import NOOP_DURABLE
    from refgame.handlers import MARCH

    servers = TaskProcesses(settings, processes, batch)
    await servers.start()
    try:
        due = due_after_writing(events)
        noop_events = [NewEvent(NOOP_DURABLE, first + i % villages, due) for i in range(events)]
        await add_events(engine, queue, noop_events)
        await wait_until(due, "durable no-op events")
        report.console.print(f"{processes} task servers run {events:,} durable no-op events ...")
        floor_s = await servers.drain(engine, NOOP_DURABLE, events, due, max(300.0, events / 100))
        due = due_after_writing(events)
        report.console.print(f"sending {events:,} attacks ...")
        await make_marches(engine, queue, first, villages, events, due_ms=due)
        await queue.aclose()
        await wait_until(due, "attacks")
        report.console.print(f"{processes} task servers run {events:,} march arrivals ...")
        cpu = CpuMeter([p.pid for p in servers.procs], database_name(settings))
        game_s = await servers.drain(engine, MARCH, events, due, max(600.0, events / 20))
        cpu_us = cpu.per_event_us(events)
    finally:
        await servers.stop()
    return floor_s, game_s, cpu_us


async def game_bench(
    *,
    events: int,
    villages: int,
    partitions: int,
    batch: int,
    db: str,
    db_name: str,
    pg_admin_url: str,
    redis_url: str,
    prefix: str,
    out: Path,
    processes: int = 1,
) -> dict[str, Any]:
    from bench import report
    from bench.databases import check_disk, drop_database, fresh_database
    from common.clock import SYSTEM_CLOCK
    from common.queue import EventQueue
    from common.redis_conn import check_redis
    from db.worldgen import generate_world
    from gameapi.loading import load_game
    from gameapi.stocks import stocks_of

    quiet_logs()
    check_bench_prefix(prefix)
    load_at_start = load_average()
    data_dir = Path("/var/lib/postgresql" if db == "postgresql" else "var")
    need = villages * GAME_BYTES_PER_VILLAGE + 2 * events * GAME_BYTES_PER_EVENT
    check_disk(data_dir, need, f"a game queue bench of {villages:,} villages, {events:,} events")
    redis = Redis.from_url(redis_url)
    database = None
    try:
        await check_redis(redis, redis_url)
        await check_memory(redis, redis_url, events)
        await clear_prefix(redis, prefix)
        database = await fresh_database(
            db, db_name, redis_url, pg_admin_url, redis_prefix=prefix,
            queue_partitions=partitions, gameserver_metrics_port=0, log_level="WARNING",
        )  # fmt: skip
        settings, engine = database.settings, database.engine
        report.console.print(f"generating a world of {villages:,} villages on {db} ...")
        loaded = load_game(settings.game)
        world = await generate_world(
            engine, players=villages, template=loaded.new_place(settings.world_speed, True),
            stocks=stocks_of(loaded), shards=settings.tick_shards,
            map_radius=radius_for(villages), seed=1,
        )  # fmt: skip
        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)

        if processes > 1:
            floor_s, game_s, cpu_us = await _game_in_processes(
                settings, engine, queue, world.first_village_id, villages, events, processes,
                batch,
            )  # fmt: skip
            game_rate, floor_rate = events / game_s, events / floor_s
            game_wall: float = game_s
            game = None
        else:
            floor_rate, game_rate, game_wall, game, cpu_us = await _game_in_process(
                settings, engine, queue, world.first_village_id, villages, events, batch
            )
        counts = await _counts(engine)
        versions = await db_version(engine)
    finally:
        with contextlib.suppress(Exception):
            await clear_prefix(redis, prefix)
        await redis.aclose()
        if database is not None:
            await drop_database(database, pg_admin_url)

    summary: dict[str, Any] = {
        "mode": "game",
        "db": db,
        "villages": villages,
        "events": events,
        "partitions": partitions,
        "batch": batch,
        "processes": processes,
        "game_events_per_s": game_rate,
        "durable_noop_per_s": floor_rate,
        "ratio_to_durable_noop": game_rate / max(floor_rate, 1e-9),
        "cpu_us_per_event": cpu_us,
        # what the CPU per event allows when the machine's cores do nothing else
        "cpu_bound_events_per_s": (os.cpu_count() or 1) * 1e6 / max(sum(cpu_us.values()), 1e-9),
        "game_drain_wall_s": game_wall,
        "counts": counts,
        "failed_handler_calls": game.failed_calls if game else None,
        "failed_handler_events": game.failed_events if game else None,
        "slowest_handler_call_s": game.slowest_call_s if game else None,
        "targets": {"game_events_per_s": TARGETS["game_events_per_s"]},
        "targets_met": {"game_events_per_s": game_rate >= TARGETS["game_events_per_s"]},
    }
    met = summary["targets_met"]["game_events_per_s"]
    report.print_table(
        f"queue --handlers game: {events:,} march arrivals, {villages:,} villages on {db}, "
        f"{partitions} partitions, {processes} task-server process(es); events/s",
        [
            [
                "march arrivals (battle, loot, reports, return)",
                f"{game_rate:,.0f}",
                f"≥ {TARGETS['game_events_per_s']:,}",
                verdict(met),
            ],
            ["durable no-op (the queue's durable floor)", f"{floor_rate:,.0f}", "", ""],
        ],
        ["events", "events/s", "target", ""],
    )
    report.console.print(
        f"march arrivals are {summary['ratio_to_durable_noop']:.2f}× the durable no-op rate; "
        f"processed {counts['processed_marches']:,} marches, {counts['reports']:,} reports, "
        f"{counts['return_marches']:,} return marches scheduled",
        highlight=False,
    )
    report.console.print(
        f"CPU per march arrival: {cpu_us['task_server']:.0f} µs in the task server(s), "
        f"{cpu_us['postgres']:.0f} µs in PostgreSQL: at most "
        f"{summary['cpu_bound_events_per_s']:,.0f}/s on {os.cpu_count()} otherwise idle cores",
        highlight=False,
    )
    if game is not None and game.failed_calls:
        from common.queue.constants import HANDLER_TIMEOUT_S

        report.console.print(
            f"[yellow]{game.failed_calls} handler calls ({game.failed_events:,} events) failed or "
            f"were cancelled; the slowest took {game.slowest_call_s:.1f} s (handler timeout "
            f"{HANDLER_TIMEOUT_S:.0f} s): their work was rolled back and the worker re-ran "
            "those events one by one[/yellow]"
        )
    warn_if_busy(load_at_start)
    extra = {
        "redis": await redis_version(redis_url),
        "database": versions,
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": load_average(),
    }
    name = f"queue_game_{db}"
    summary["json"] = str(
        report.save_json(out, name, {"machine": report.machine_info(extra), **summary})
    )
    return summary
