"""The game run: the loaded game's events (``Game.bench``) on a bench database beside durable
no-op events."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    add_game_events,
    radius_for,
    timed_registry,
)
from bench.queue.memory import check_memory
from bench.queue.noop import verdict
from bench.queue.processes import TaskProcesses, due_after_writing, wait_until
from bench.queue.runner import Rates, Recorder, quiet_logs, run_task_server
from common.errors import FatalError

if TYPE_CHECKING:
    from gameapi.bench import GameBench


async def _counts(engine: Any, bench: GameBench) -> dict[str, int]:
    """The framework's counts (events of the measured kind processed, events still
    pending) and the game's own (``bench.counts``)."""
    from sqlalchemy import func, select

    from db.models import ProcessedEvent, ScheduledEvent

    async with engine.connect() as conn:
        processed = await conn.scalar(select(func.count()).where(ProcessedEvent.kind == bench.kind))
        pending = await conn.scalar(select(func.count()).select_from(ScheduledEvent))
        game = await bench.counts(conn)
    return {"processed_events": int(processed or 0), "pending_events": int(pending or 0), **game}


async def _game_in_process(
    settings: Any, engine: Any, queue: Any, kind: str, first: int, villages: int, events: int,
    batch: int,
) -> tuple[float, float, float, Recorder, dict[str, float]]:  # fmt: skip
    """Both phases on a task server in this process: (floor/s, game/s, game wall s, recorder,
    CPU µs per game event)."""
    from tqdm import tqdm

    from bench import report
    from common.queue import NewEvent
    from gameserver.builtin import NOOP_DURABLE

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

    report.console.print(f"scheduling {events:,} {kind} events, due now ...")
    places = range(first, first + villages)
    await add_game_events(settings, engine, queue, places, events, int(time.time() * 1000))
    await queue.aclose()
    game = Recorder(events)
    cpu = CpuMeter([os.getpid()], database_name(settings))
    cpu_us: dict[str, float] = {}

    def measure_cpu() -> None:  # before the task server closes its connections
        cpu_us.update(cpu.per_event_us(events))

    with tqdm(total=events, desc=f"{kind} events", unit="ev", unit_scale=True) as bar:
        game.progress = bar
        game_wall = await run_task_server(
            settings, timed_registry(settings, game, kind), game, burst=True, batch=batch,
            timeout_s=max(600.0, events / 20), on_done=measure_cpu,
        )  # fmt: skip
    floor_rate = Rates(events, floor.window_s()).per_s
    game_rate = Rates(events, game.window_s()).per_s
    return floor_rate, game_rate, game_wall, game, cpu_us


async def _game_in_processes(
    settings: Any, engine: Any, queue: Any, kind: str, first: int, villages: int, events: int,
    processes: int, batch: int,
) -> tuple[float, float, dict[str, float]]:  # fmt: skip
    """Both phases on ``processes`` real task servers: (floor seconds, game seconds), each
    from the moment all its events became due until the last was processed."""
    from bench import report
    from common.queue import NewEvent
    from gameserver.builtin import NOOP_DURABLE

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
        report.console.print(f"scheduling {events:,} {kind} events ...")
        places = range(first, first + villages)
        await add_game_events(settings, engine, queue, places, events, due)
        await queue.aclose()
        await wait_until(due, f"{kind} events")
        report.console.print(f"{processes} task servers run {events:,} {kind} events ...")
        cpu = CpuMeter([p.pid for p in servers.procs], database_name(settings))
        game_s = await servers.drain(engine, kind, events, due, max(600.0, events / 20))
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
    from common.settings import load_settings
    from db.worldgen import generate_world
    from gameapi.loading import load_game
    from gameapi.stocks import stocks_of

    quiet_logs()
    check_bench_prefix(prefix)
    loaded = load_game(load_settings().game)
    if loaded.bench is None:
        raise FatalError(
            f"game {loaded.name!r} declares no bench workload (Game.bench); "
            "--handlers game cannot run it"
        )
    bench = loaded.bench
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
        report.console.print(
            f"generating a world of {villages:,} {loaded.name} places on {db} ...",
            highlight=False,
        )
        world = await generate_world(
            engine, players=villages, template=loaded.new_place(settings.world_speed, True),
            stocks=stocks_of(loaded), shards=settings.tick_shards,
            map_radius=radius_for(villages), seed=1,
        )  # fmt: skip
        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)

        if processes > 1:
            floor_s, game_s, cpu_us = await _game_in_processes(
                settings, engine, queue, bench.kind, world.first_village_id, villages, events,
                processes, batch,
            )  # fmt: skip
            game_rate, floor_rate = events / game_s, events / floor_s
            game_wall: float = game_s
            game = None
        else:
            floor_rate, game_rate, game_wall, game, cpu_us = await _game_in_process(
                settings, engine, queue, bench.kind, world.first_village_id, villages, events,
                batch,
            )  # fmt: skip
        counts = await _counts(engine, bench)
        versions = await db_version(engine)
    finally:
        with contextlib.suppress(Exception):
            await clear_prefix(redis, prefix)
        await redis.aclose()
        if database is not None:
            await drop_database(database, pg_admin_url)

    summary: dict[str, Any] = {
        "mode": "game",
        "game": loaded.name,
        "kind": bench.kind,
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
        f"queue --handlers game ({loaded.name}): {events:,} {bench.kind} events, "
        f"{villages:,} places on {db}, "
        f"{partitions} partitions, {processes} task-server process(es); events/s",
        [
            [
                f"{bench.kind} events (the game's handlers)",
                f"{game_rate:,.0f}",
                f"≥ {TARGETS['game_events_per_s']:,}",
                verdict(met),
            ],
            ["durable no-op (the queue's durable floor)", f"{floor_rate:,.0f}", "", ""],
        ],
        ["events", "events/s", "target", ""],
    )
    report.console.print(
        f"{bench.kind} events are {summary['ratio_to_durable_noop']:.2f}× the durable no-op "
        "rate; " + ", ".join(f"{name} {n:,}" for name, n in counts.items()),
        highlight=False,
    )
    report.console.print(
        f"CPU per {bench.kind} event: {cpu_us['task_server']:.0f} µs in the task server(s), "
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
