"""The whole web run: a fresh database, the servers, the phases, the figures and the table."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.web.cpu import CpuWatch
from bench.web.load import LoadGenerator
from bench.web.model import CEILING, PHASE_SHORT, PHASE_TITLES, PHASES, TARGETS, LoadResult
from bench.web.phases import Changes, WebFigures, run_phases
from bench.web.players import (
    check_reachable,
    read_tokens,
    refresh_players,
    register_players,
    stock_players,
    sweep_orders,
)
from bench.web.servers import Servers


async def web_bench(
    *,
    players: int,
    connections: int,
    sweep: Sequence[int],
    duration_s: float,
    sweep_duration_s: float,
    workers: int,
    db: str,
    db_name: str,
    pg_admin_url: str,
    redis_url: str,
    prefix: str,
    url: str | None,
    token_file: Path | None,
    save_tokens: Path | None,
    client: str,
    client_threads: int,
    out: Path,
    full_cycle: bool = True,
) -> dict[str, Any]:
    """Start (or reach) the servers, create players, run every phase, print, save."""
    from redis.asyncio import Redis
    from tqdm import tqdm

    from bench import report
    from bench.databases import drop_database, fresh_database
    from bench.host import load_average, redis_version, warn_if_busy
    from bench.prefix import check_bench_prefix, clear_prefix

    load_at_start = load_average()
    load = LoadGenerator.pick(client, client_threads)
    levels = sorted({*sweep, connections})
    redis: Redis | None = None
    if url:
        url = url.rstrip("/")
        await check_reachable(url)
    else:
        from common.redis_conn import check_redis

        check_bench_prefix(prefix)
        owned = Redis.from_url(redis_url)  # not `client`: that names the load generator
        try:
            await check_redis(owned, redis_url)
        except BaseException:
            await owned.aclose()
            raise
        redis = owned
    bare: Servers | None = None
    ceiling: Servers | None = None  # the hand-written commands (PostgreSQL only)
    game: Servers | None = None
    uncached: Servers | None = None  # the game with its snapshot body caches off
    database = None
    try:
        bare = await Servers("hello", workers).start()
        if redis is not None:
            await clear_prefix(redis, prefix)
            database = await fresh_database(db, db_name, redis_url, pg_admin_url)
            env = {
                "DATABASE_URL": database.settings.database_url,
                "REDIS_URL": redis_url,
                "REDIS_PREFIX": prefix,
                "LOG_LEVEL": "WARNING",
            }
            game = await Servers("serve", workers, env).start()
            game_url = game.url
            uncached = await Servers("serve-uncached", workers, env).start()
            if db == "postgresql":
                ceiling = await Servers("commands", workers, env).start()
        else:
            assert url is not None
            game_url = url
        if token_file is not None:
            roster = read_tokens(token_file)
        else:
            with tqdm(total=players, desc="registering players", unit="player") as bar:
                roster = await register_players(game_url, players, bar)
            if save_tokens is not None:
                save_tokens.write_text("".join(f"{p.token}\n" for p in roster))
                save_tokens.chmod(0o600)
        roster = await refresh_players(game_url, roster)
        sweeper = None
        if database is not None:
            await stock_players(database.settings, roster)
            settings = database.settings
            sweeper = partial(sweep_orders, settings)
        # only a bench server's Redis is ours to bump versions in
        changes = Changes(redis, prefix, full_cycle) if redis is not None else None
        watches = {
            "bare": CpuWatch(bare.pids, None),
            "game": CpuWatch(game.pids if game else [], redis_url if game else None),
        }
        if ceiling is not None:
            watches["bare_commands"] = watches["bare_refused"] = CpuWatch(ceiling.pids, None)
        if uncached is not None:
            watches["build"] = CpuWatch(uncached.pids, redis_url)
        results = await run_phases(
            load, bare.url, game_url, roster, levels, connections, duration_s,
            sweep_duration_s, watches, changes, ceiling.url if ceiling else None, sweeper,
            uncached.url if uncached else None,
            uncached.snapshot_builds if uncached and workers == 1 else None,
        )  # fmt: skip
    finally:
        if game is not None:
            game.stop()
        if bare is not None:
            bare.stop()
        if ceiling is not None:
            ceiling.stop()
        if uncached is not None:
            uncached.stop()
        if database is not None:
            await drop_database(database, pg_admin_url)
        if redis is not None:
            with contextlib.suppress(Exception):  # Redis went away: nothing left to tidy
                await clear_prefix(redis, prefix)
            await redis.aclose()
    figures = WebFigures(
        results, connections, len(roster), workers, load.version(), url or f"bench server ({db})"
    )
    summary = figures.summary()
    _print(figures, summary)

    def draw(ax: Any) -> None:
        for phase in PHASES:
            points = sorted((r.connections, r.rps) for r in results if r.phase == phase)
            if not points:
                continue
            ax.plot(*zip(*points, strict=True), marker="o", label=PHASE_TITLES[phase])
        ax.set_xlabel("concurrent connections")
        ax.set_ylabel("requests/s")
        ax.set_ylim(bottom=0)
        ax.set_title(f"web: req/s vs concurrency ({workers} process(es), {summary['target']})")
        ax.legend(fontsize="small")

    # several processes get their own file: the one-process figures stay published beside them
    name = (f"web_{db}" if url is None else "web_external") + ("_workers" if workers > 1 else "")
    summary["plot"] = str(report.save_plot(out, name, draw))
    warn_if_busy(load_at_start)
    extra = {
        "redis": await redis_version(redis_url),
        "load_generator": load.version(),
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": load_average(),
    }
    summary["json"] = str(
        report.save_json(out, name, {"machine": report.machine_info(extra), **summary})
    )
    return summary


def _statuses(result: LoadResult) -> str:
    """The two most frequent answers as shares, and transport errors if any."""
    ranked = sorted(result.statuses.items(), key=lambda kv: -kv[1])[:2]
    text = " ".join(f"{code}:{n / max(1, result.requests):.0%}" for code, n in ranked)
    errors = sum(result.errors.values())
    return text + (f" err:{errors}" if errors else "")


def _print(figures: WebFigures, summary: dict[str, Any]) -> None:
    from bench import report

    rows, notes = [], []
    for r in sorted(figures.results, key=lambda r: (PHASES.index(r.phase), r.connections)):
        bare = figures.at(CEILING.get(r.phase, "bare"), r.connections)
        ratio = r.rps / bare.rps if bare and bare.rps else 0.0
        lat = [f"{r.latency_ms[k]:.1f}" for k in ("p50", "p90", "p99", "max")]
        rows.append([PHASE_SHORT[r.phase], r.connections, f"{r.rps:,.0f}", *lat, f"{ratio:.2f}"])
        cpu = (
            f"; server CPU {r.cpu_us_per_request('server'):,.0f} µs/request"
            if r.cpu_s.get("server")
            else ""  # an external server: its processes are not ours to watch
        )
        if r.builds is not None:
            cpu += f"; {r.builds:,} bodies built ({r.builds / max(1, r.requests):.0%} of answers)"
        notes.append(f"  {PHASE_SHORT[r.phase]} c={r.connections}: answers {_statuses(r)}{cpu}")
    report.print_table(
        f"web: {figures.players} players, {figures.workers} process(es), {figures.target}; "
        f"{figures.client}; latency in ms",
        rows,
        ["phase", "conns", "req/s", "p50", "p90", "p99", "max", "× bare"],
    )
    report.console.print("\n".join(notes), highlight=False)
    ratios, met = summary["ratios"], summary["targets_met"]
    r304, rfull = ratios["poll_304_ratio"] or 0.0, ratios["full_ratio"] or 0.0
    p304, pfull = figures.at("poll_304"), figures.at("full")
    report.console.print(
        f"at {figures.connections} connections: 304/bare {r304:.2f} (target ≥ "
        f"{TARGETS['poll_304_ratio']}: {'met' if met['poll_304_ratio'] else 'MISSED'}), "
        f"full/bare {rfull:.2f} (target ≥ {TARGETS['full_ratio']}: "
        f"{'met' if met['full_ratio'] else 'MISSED'}), p99 304 "
        f"{p304.latency_ms['p99'] if p304 else 0:.1f} ms / full "
        f"{pfull.latency_ms['p99'] if pfull else 0:.1f} ms (target < {TARGETS['p99_ms']:.0f} ms: "
        f"{'met' if met['poll_304_p99'] and met['full_p99'] else 'MISSED'})"
    )
    if figures.at("bare_commands") is not None:
        parts = []
        for phase in ("commands", "refused"):
            ours = figures.at(phase)
            ratio = ratios[f"{phase}_ratio"] or 0.0
            parts.append(
                f"{phase}/ceiling {ratio:.2f} (target ≥ {TARGETS['commands_ratio']}: "
                f"{'met' if met[f'{phase}_ratio'] else 'MISSED'}), p99 "
                f"{ours.latency_ms['p99'] if ours else 0:.1f} ms (target < "
                f"{TARGETS['commands_p99_ms']:.0f} ms: "
                f"{'met' if met[f'{phase}_p99'] else 'MISSED'})"
            )
        report.console.print("commands: " + "; ".join(parts))
        refused, build = figures.at("refused"), figures.at("build")
        if refused is not None and build is not None:
            report.console.print(
                f"a refusal {refused.cpu_us_per_request('server'):,.0f} µs of web CPU, a "
                f"snapshot build {build.cpu_us_per_request('server'):,.0f} µs (target: no "
                f"more: {'met' if met.get('refused_cpu') else 'MISSED'})"
            )
        for phase in ("commands", "refused"):
            if not figures.answered_as_meant(phase):
                report.console.print(
                    f"[yellow]the {phase} phase was not answered as meant (accepted, or "
                    f"refused): its ratio counts as missed[/yellow]"
                )
