"""The no-op run: ceilings, ``schedule_many``, the drain, lateness and the arq peer."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.host import load_average, redis_version, warn_if_busy
from bench.prefix import check_bench_prefix, clear_prefix
from bench.queue.arq_peer import arq_peer, clear_arq_keys
from bench.queue.ceilings import bare_pop, raw_zadd
from bench.queue.constants import ARQ_MAX_JOBS, ARQ_POLL_DELAY_S, DEFAULT_ARQ_PYTHON, TARGETS
from bench.queue.memory import check_memory
from bench.queue.runner import (
    Rates,
    Recorder,
    bench_registry,
    lateness_percentiles,
    quiet_logs,
    run_task_server,
    schedule_ours,
)
from bench.queue.steady import Steady, steady_load
from common.errors import FatalError


async def noop_bench(
    *,
    events: int,
    partitions: int,
    batch: int,
    rate: float | None,
    steady_seconds: float,
    warmup_seconds: float = 2.0,
    redis_url: str,
    prefix: str,
    db_name: str,
    out: Path,
    vs_arq: bool = False,
    arq_python: Path = DEFAULT_ARQ_PYTHON,
    arq_events: int = 10_000,
) -> dict[str, Any]:
    from tqdm import tqdm

    from bench import report
    from bench.databases import drop_database, fresh_database
    from common.clock import SYSTEM_CLOCK
    from common.queue import EventQueue
    from common.redis_conn import check_redis

    quiet_logs()
    check_bench_prefix(prefix)
    load_at_start = load_average()
    redis = Redis.from_url(redis_url)
    database = None
    try:
        await check_redis(redis, redis_url)
        memory = await check_memory(redis, redis_url, events)
        await clear_prefix(redis, prefix)
        database = await fresh_database(
            "sqlite", db_name, redis_url, redis_prefix=prefix, queue_partitions=partitions,
            gameserver_metrics_port=0, log_level="WARNING",
        )  # fmt: skip
        settings = database.settings
        start_ms = int(time.time() * 1000)

        with tqdm(total=events, desc="raw ZADD (ceiling)", unit="ev", unit_scale=True) as bar:
            zadd_s = await raw_zadd(redis, prefix, partitions, events, start_ms, bar)
        with tqdm(total=events, desc="bare Lua pop (ceiling)", unit="ev", unit_scale=True) as bar:
            popped, pop_s = await bare_pop(redis, prefix, partitions, batch, bar)
        if popped != events:
            raise FatalError(f"the bare pop found {popped:,} members, not {events:,}")

        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)
        before = int((await redis.info("memory"))["used_memory"])
        with tqdm(total=events, desc="schedule_many", unit="ev", unit_scale=True) as bar:
            schedule_s = await schedule_ours(queue, events, start_ms, None, bar)
        redis_bytes = (int((await redis.info("memory"))["used_memory"]) - before) / events
        await queue.aclose()

        recorder = Recorder(events)
        with tqdm(total=events, desc="task server drain", unit="ev", unit_scale=True) as bar:
            recorder.progress = bar
            drain_cpu = time.process_time()
            drain_wall = await run_task_server(
                settings, bench_registry(recorder), recorder, burst=True, batch=batch,
                timeout_s=max(120.0, events / 5_000),
            )  # fmt: skip
            drain_cpu = time.process_time() - drain_cpu
        dispatch = Rates(events, recorder.window_s())
        backlog = lateness_percentiles(recorder.lateness_ms)

        arq = None
        if vs_arq:
            report.console.print(f"arq: {arq_events:,} deferred no-op jobs ({arq_python}) ...")
            arq = await arq_peer(arq_python, redis_url, prefix, arq_events)

        steady_rate = rate if rate is not None else dispatch.per_s / 2
        steady = None
        if steady_seconds > 0:
            steady = await steady_load(
                settings, redis, prefix, partitions, batch, steady_rate, steady_seconds,
                Rates(events, schedule_s).per_s, warmup_seconds,
            )  # fmt: skip
    finally:
        with contextlib.suppress(Exception):
            await clear_prefix(redis, prefix)
            if vs_arq:
                await clear_arq_keys(redis, prefix)
        await redis.aclose()
        if database is not None:
            await drop_database(database)

    zadd, pop, sched = Rates(events, zadd_s), Rates(popped, pop_s), Rates(events, schedule_s)
    summary: dict[str, Any] = {
        "mode": "noop",
        "events": events,
        "partitions": partitions,
        "batch": batch,
        "schedule_per_s": sched.per_s,
        "raw_zadd_per_s": zadd.per_s,
        "schedule_ratio": sched.per_s / zadd.per_s,
        "dispatch_per_s": dispatch.per_s,
        "bare_pop_per_s": pop.per_s,
        "dispatch_ratio": dispatch.per_s / pop.per_s,
        # beside the steady run's: a steady flow costs more per event than a backlog
        "dispatch_cpu_us_per_event": drain_cpu * 1e6 / events,
        "drain_wall_s": drain_wall,
        "backlog_age_ms": backlog,
        "redis_bytes_per_event": redis_bytes,
        "memory": memory,
        "targets": TARGETS,
    }
    if steady is not None:
        summary["steady"] = steady.summary()
    if arq is not None:
        summary["arq"] = arq
        summary["dispatch_vs_arq"] = dispatch.per_s / max(arq["run_per_s"], 1e-9)
    met = {
        "dispatch_per_s": dispatch.per_s >= TARGETS["dispatch_per_s"],
        "dispatch_ratio": summary["dispatch_ratio"] >= TARGETS["dispatch_ratio"],
        "schedule_ratio": summary["schedule_ratio"] >= TARGETS["schedule_ratio"],
    }
    if steady is not None:
        lat = steady.lateness()
        met["lateness_p99"] = lat["p99"] <= TARGETS["lateness_p99_ms"]
        met["lateness_max"] = lat["max"] <= TARGETS["lateness_max_ms"]
    summary["targets_met"] = met
    _print_noop(summary, steady)
    if steady is not None:
        summary["plot"] = str(
            report.save_plot(out, "queue_lateness", lambda ax: steady.draw(ax, dispatch.per_s))
        )
        summary["plot_over_time"] = str(
            report.save_plot(out, "queue_lateness_time", steady.draw_over_time)
        )
    warn_if_busy(load_at_start)
    extra = {
        "redis": await redis_version(redis_url),
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": load_average(),
    }
    summary["json"] = str(
        report.save_json(out, "queue_noop", {"machine": report.machine_info(extra), **summary})
    )
    return summary


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _print_noop(summary: dict[str, Any], steady: Steady | None) -> None:
    from bench import report

    met = summary["targets_met"]
    rows = [
        ["schedule_many", f"{summary['schedule_per_s']:,.0f}", "raw ZADD",
         f"{summary['raw_zadd_per_s']:,.0f}", f"{summary['schedule_ratio']:.2f}",
         f"≥ {TARGETS['schedule_ratio']}", verdict(met["schedule_ratio"])],
        ["dispatch", f"{summary['dispatch_per_s']:,.0f}", "bare Lua pop",
         f"{summary['bare_pop_per_s']:,.0f}", f"{summary['dispatch_ratio']:.2f}",
         f"≥ {TARGETS['dispatch_ratio']}", verdict(met["dispatch_ratio"])],
        ["dispatch", f"{summary['dispatch_per_s']:,.0f}", "absolute", "", "",
         f"≥ {TARGETS['dispatch_per_s'] // 1000}k/s", verdict(met["dispatch_per_s"])],
    ]  # fmt: skip
    report.print_table(
        f"queue: {summary['events']:,} events, {summary['partitions']} partitions, "
        f"batches of {summary['batch']}; events/s (dispatch = claim + no-op handler + ack)",
        rows,
        ["ours", "events/s", "ceiling", "events/s", "ratio", "target", ""],
    )
    if steady is not None:
        lat = steady.lateness()
        report.print_table(
            f"lateness at {steady.rate:,.0f} events/s for {steady.seconds:.0f} s after "
            f"{steady.warmup_s:g} s of warm-up "
            f"({steady.rate / max(summary['dispatch_per_s'], 1e-9):.0%} of the dispatch rate), ms",
            [[f"{steady.events:,}", *(f"{lat[k]:.1f}" for k in ("p50", "p90", "p99", "max"))]],
            ["events", "p50", "p90", "p99", "max"],
        )
        report.console.print(
            f"lateness p99 {lat['p99']:.1f} ms (target ≤ {TARGETS['lateness_p99_ms']:.0f}: "
            f"{verdict(met['lateness_p99'])}), max {lat['max']:.1f} ms (target ≤ "
            f"{TARGETS['lateness_max_ms']:.0f}: {verdict(met['lateness_max'])}); task server "
            f"CPU {summary['steady']['cpu_us_per_event']:.2f} µs per event (the drain: "
            f"{summary['dispatch_cpu_us_per_event']:.2f})"
        )
        if steady.warmup_s:
            warm = summary["steady"]["warmup_lateness_ms"]
            report.console.print(
                f"the warm-up (not measured): p99 {warm['p99']:.1f} ms, max {warm['max']:.1f} ms"
            )
    arq = summary.get("arq")
    if arq:
        lat = arq["lateness_ms"]
        report.print_table(
            f"peer: arq {arq['version']}, {arq['events']:,} deferred no-op jobs, one worker "
            f"(max_jobs={ARQ_MAX_JOBS}, poll_delay={ARQ_POLL_DELAY_S} s); events/s",
            [
                [
                    "arq",
                    f"{arq['enqueue_per_s']:,.0f}",
                    f"{arq['run_per_s']:,.0f}",
                    f"{lat['p50']:.0f}",
                    f"{lat['p99']:.0f}",
                    f"{summary['dispatch_vs_arq']:,.0f}×",
                ]
            ],
            ["", "enqueue", "run", "late p50 ms", "late p99 ms", "our dispatch"],
        )
    report.console.print(
        f"Redis memory: {summary['redis_bytes_per_event']:.0f} bytes per pending event",
        highlight=False,
    )
