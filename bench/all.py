"""``python -m bench all``: tick, queue (no-op and game) and web at moderate sizes, one table."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.tick import TICK_TARGETS
from common.errors import FatalError


def _ok(ok: bool) -> str:
    return "met" if ok else "MISSED"


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    """(figure, ours, ceiling, ratio, target, verdict) rows of what ran."""
    rows: list[list[str]] = []
    tick = results.get("tick")
    if isinstance(tick, dict):
        db = tick.get("db", "postgresql")
        target = TICK_TARGETS["ratio_to_bare"]
        rows.append([f"tick villages/s ({db})", f"{tick['villages_per_s']:,.0f}",
                     f"{tick['bare_villages_per_s']:,.0f}", f"{tick['ratio_to_bare']:.2f}",
                     f"≥ {target}", _ok(tick["ratio_to_bare"] >= target)])  # fmt: skip
        projected = tick["projected_max_villages_p99_under_1s"]
        rows.append(["tick villages/rotation", f"{projected:,}", "", "",
                     f"≥ {TICK_TARGETS[db] / 1e6:.0f}M",
                     _ok(projected >= TICK_TARGETS[db])])  # fmt: skip
    queue = results.get("queue")
    if isinstance(queue, dict):
        met = queue["targets_met"]
        rows.append(["queue schedule/s", f"{queue['schedule_per_s']:,.0f}",
                     f"{queue['raw_zadd_per_s']:,.0f}", f"{queue['schedule_ratio']:.2f}",
                     "≥ 0.7", _ok(met["schedule_ratio"])])  # fmt: skip
        dispatch_ok = met["dispatch_ratio"] and met["dispatch_per_s"]
        rows.append(["queue dispatch/s", f"{queue['dispatch_per_s']:,.0f}",
                     f"{queue['bare_pop_per_s']:,.0f}", f"{queue['dispatch_ratio']:.2f}",
                     "≥ .4, 100k", _ok(dispatch_ok)])  # fmt: skip
        steady = queue.get("steady")
        if steady:
            lat = steady["lateness_ms"]
            rows.append([f"lateness ms @{steady['rate_per_s'] / 1000:,.0f}k/s",
                         f"{lat['p99']:.1f} / {lat['max']:.1f}", "", "", "20 / 100",
                         _ok(met["lateness_p99"] and met["lateness_max"])])  # fmt: skip
    game = results.get("queue_game")
    if isinstance(game, dict):
        rows.append([f"game marches/s ({game['db'][:2]})", f"{game['game_events_per_s']:,.0f}",
                     f"{game['durable_noop_per_s']:,.0f}", f"{game['ratio_to_durable_noop']:.2f}",
                     "≥ 3,000", _ok(game["targets_met"]["game_events_per_s"])])  # fmt: skip
    web = results.get("web")
    if isinstance(web, dict):
        at = {r["phase"]: r for r in web["results"] if r["connections"] == web["connections"]}
        met, ratios = web["targets_met"], web["ratios"]
        for phase, label, target in (("poll_304", "304", 0.7), ("full", "full", 0.4)):
            r = at.get(phase)
            if r is None:
                continue
            rows.append([f"web {label} req/s, p99 {r['latency_ms']['p99']:.0f}ms",
                         f"{r['rps']:,.0f}", f"{at['bare']['rps']:,.0f}",
                         f"{ratios[f'{phase}_ratio']:.2f}", f"≥ {target}, 50ms",
                         _ok(met[f"{phase}_ratio"] and met[f"{phase}_p99"])])  # fmt: skip
        commands = at.get("commands")
        if commands is not None:
            rows.append([f"web cmd req/s, p99 {commands['latency_ms']['p99']:.0f}ms",
                         f"{commands['rps']:,.0f}", f"{at['bare']['rps']:,.0f}",
                         f"{ratios['commands_ratio']:.2f}", "", ""])  # fmt: skip
    for name, value in results.items():
        if isinstance(value, str):
            rows.append([name, "failed", "", "", "", "ERROR"])
    return rows


async def all_bench(
    *,
    villages: int,
    events: int,
    game_events: int,
    web_duration: float,
    db: str,
    web_db: str,
    pg_admin_url: str,
    redis_url: str,
    out: Path,
) -> dict[str, Any]:
    from bench import report
    from bench.queue import game_bench, noop_bench
    from bench.tick import tick_bench
    from bench.web import web_bench

    steps: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
        ("tick", lambda: tick_bench(villages, 60, 2, db, "wgbench_tick", pg_admin_url,
                                    redis_url, out)),
        ("queue", lambda: noop_bench(events=events, partitions=16, batch=1000, rate=None,
                                     steady_seconds=10, redis_url=redis_url,
                                     prefix="wgbench_queue", db_name="wgbench_queue", out=out)),
        ("queue_game", lambda: game_bench(events=game_events, villages=max(1000, game_events),
                                          partitions=16, batch=1000, db=db,
                                          db_name="wgbench_queue_game",
                                          pg_admin_url=pg_admin_url, redis_url=redis_url,
                                          prefix="wgbench_queue_game", out=out)),
        ("web", lambda: web_bench(players=200, connections=100, sweep=[10, 50],
                                  duration_s=web_duration, sweep_duration_s=web_duration / 2,
                                  workers=1, db=web_db, db_name="wgbench_web",
                                  pg_admin_url=pg_admin_url, redis_url=redis_url,
                                  prefix="wgbench_web", url=None, token_file=None,
                                  save_tokens=None, client="auto", client_threads=1, out=out)),
    ]  # fmt: skip
    if game_events == 0:
        steps = [s for s in steps if s[0] != "queue_game"]
    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name, step in steps:
        report.console.rule(f"bench {name}")
        started = time.perf_counter()
        try:
            results[name] = await step()
            if name == "tick":
                results[name]["db"] = db
        except FatalError as exc:  # one clear line, then the other benchmarks still run
            report.console.print(f"[red]bench {name} failed: {exc}[/red]")
            results[name] = f"error: {exc}"
        seconds[name] = time.perf_counter() - started
    report.console.rule("summary")
    report.print_table(
        "bench all: ours beside the ceiling measured in the same run",
        summary_rows(results),
        ["figure", "ours", "ceiling", "ratio", "target", ""],
    )
    for name, value in results.items():
        if isinstance(value, str):
            report.console.print(f"[red]{name}: {value}[/red]")
    path = report.save_json(
        out, "all", {"machine": report.machine_info(), "seconds": seconds, **results}
    )
    report.console.print(f"all figures: {path}", highlight=False)
    failed = [name for name, value in results.items() if isinstance(value, str)]
    if failed:
        raise FatalError(f"these benchmarks failed: {', '.join(failed)}")
    return {"json": str(path), **results}
