"""``python -m bench``: load tests that print a table, write JSON and draw PNG plots."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from bench.databases import DEFAULT_PG_ADMIN_URL
from bench.readme import PUBLISHED_DIR, README
from bench.tick import tick_bench
from common.entrypoint import fail, run_async
from common.errors import FatalError

OUT_DIR = Path("bench/results")


@click.group()
def cli() -> None:
    """Measure queue events/s, tick capacity and snapshot polling beside their raw ceilings."""


@cli.command()
@click.option(
    "--villages", type=click.IntRange(100, 50_000_000), default=1_000_000, show_default=True
)
@click.option("--shards", type=click.IntRange(1, 3600), default=60, show_default=True)
@click.option("--rotations", type=click.IntRange(1, 100), default=2, show_default=True)
@click.option(
    "--db", type=click.Choice(["sqlite", "postgresql"]), default="postgresql", show_default=True
)
@click.option("--db-name", default="wgbench_tick", show_default=True, help="bench-owned database")
@click.option("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL, show_default=True)
@click.option("--redis-url", default="redis://127.0.0.1:6379/0", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=OUT_DIR, show_default=True)
def tick(
    villages: int,
    shards: int,
    rotations: int,
    db: str,
    db_name: str,
    pg_admin_url: str,
    redis_url: str,
    out: Path,
) -> None:
    """Tick capacity: full rotations of the sharded tick beside a bare UPDATE."""

    async def go() -> None:
        await tick_bench(villages, shards, rotations, db, db_name, pg_admin_url, redis_url, out)

    run_async(go)


def _levels(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        levels = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of connection counts") from None
    if any(not 1 <= c <= 10_000 for c in levels):
        raise click.BadParameter("connection counts are between 1 and 10000")
    return levels


@cli.command()
@click.option(
    "--players",
    type=click.IntRange(1, 20_000),
    default=1000,
    show_default=True,
    help="registered players; half can pay for every build, half for none",
)
@click.option(
    "--connections", type=click.IntRange(1, 10_000), default=100, show_default=True,
    help="concurrent connections of the main measurement",
)  # fmt: skip
@click.option(
    "--sweep", default="10,50", show_default=True, callback=_levels,
    help="more connection counts for the req/s-vs-concurrency plot ('' for none)",
)  # fmt: skip
@click.option("--duration", type=click.FloatRange(1, 3600), default=10, show_default=True,
              help="seconds per phase at --connections")  # fmt: skip
@click.option("--sweep-duration", type=click.FloatRange(1, 3600), default=5, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="web processes sharing the port (and as many bare ones)")  # fmt: skip
@click.option(
    "--db", type=click.Choice(["sqlite", "postgresql"]), default="sqlite", show_default=True
)
@click.option("--db-name", default="wgbench_web", show_default=True, help="bench-owned database")
@click.option("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL, show_default=True)
@click.option("--redis-url", default="redis://127.0.0.1:6379/0", show_default=True)
@click.option("--prefix", default="wgbench_web", show_default=True, help="bench Redis key prefix")
@click.option("--url", default=None, help="an external web server instead of a bench one")
@click.option(
    "--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="session tokens of existing players, one per line (skips registration)",
)  # fmt: skip
@click.option(
    "--save-tokens", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="write the registered players' tokens here (for --token-file next time)",
)  # fmt: skip
@click.option(
    "--client", type=click.Choice(["auto", "wrk", "python"]), default="auto", show_default=True,
    help="load generator: wrk if installed, else an aiohttp client process",
)  # fmt: skip
@click.option("--client-threads", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option(
    "--full-cycle/--no-full-cycle", default=True, show_default=True,
    help="during each full-snapshot phase, bump every player's snapshot version once at a "
    "random moment (bodies are rebuilt as a game would make them)",
)  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), default=OUT_DIR, show_default=True)
def web(
    players: int,
    connections: int,
    sweep: list[int],
    duration: float,
    sweep_duration: float,
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
    full_cycle: bool,
    out: Path,
) -> None:
    """Snapshot polling (304 and full) and commands beside a bare aiohttp endpoint."""
    from bench.web import web_bench

    async def go() -> None:
        await web_bench(
            players=players, connections=connections, sweep=sweep, duration_s=duration,
            sweep_duration_s=sweep_duration, workers=workers, db=db, db_name=db_name,
            pg_admin_url=pg_admin_url, redis_url=redis_url, prefix=prefix, url=url,
            token_file=token_file, save_tokens=save_tokens, client=client,
            client_threads=client_threads, out=out, full_cycle=full_cycle,
        )  # fmt: skip

    run_async(go)


@cli.command()
@click.option(
    "--events", type=click.IntRange(1, 100_000_000), default=None,
    help="events to schedule and drain  [default: 1,000,000; 20,000 with --handlers game]",
)  # fmt: skip
@click.option("--partitions", type=click.IntRange(1, 1024), default=16, show_default=True)
@click.option("--batch", type=click.IntRange(1, 4000), default=1000, show_default=True,
              help="events per claim (and per bare pop)")  # fmt: skip
@click.option("--rate", type=click.FloatRange(1, 10_000_000), default=None,
              help="steady load in events/s for the lateness run [default: half the measured "
                   "dispatch rate]")  # fmt: skip
@click.option("--steady-seconds", type=click.FloatRange(0, 3600), default=10, show_default=True,
              help="length of the steady load (0: skip the lateness run)")  # fmt: skip
@click.option("--warmup-seconds", type=click.FloatRange(0, 600), default=2, show_default=True,
              help="the same steady load before the measured one, reported apart")  # fmt: skip
@click.option(
    "--handlers", type=click.Choice(["noop", "game"]), default="noop", show_default=True,
    help="game: real events of the game GAME names (its Game.bench workload)",
)  # fmt: skip
@click.option("--villages", type=click.IntRange(2, 10_000_000), default=10_000,
              show_default=True, help="world size for --handlers game")  # fmt: skip
@click.option("--processes", type=click.IntRange(1, 64), default=1, show_default=True,
              help="--handlers game: task-server processes (>1: real gameserver processes "
                   "sharing the partitions)")  # fmt: skip
@click.option(
    "--db", type=click.Choice(["sqlite", "postgresql"]), default="postgresql", show_default=True,
    help="database of --handlers game",
)  # fmt: skip
@click.option("--vs", "vs", type=click.Choice(["arq"]), default=None,
              help="also measure a peer on deferred no-op jobs")  # fmt: skip
@click.option(
    "--arq-python", type=click.Path(dir_okay=False, path_type=Path),
    default=Path("var/bench/arq-venv/bin/python"), show_default=True,
    help="an interpreter with arq installed (arq pins redis-py < 6, so it lives apart)",
)  # fmt: skip
@click.option("--arq-events", type=click.IntRange(1, 1_000_000), default=10_000,
              show_default=True, help="jobs for --vs arq")  # fmt: skip
@click.option("--db-name", default="wgbench_queue", show_default=True, help="bench-owned database")
@click.option("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL, show_default=True)
@click.option("--redis-url", default="redis://127.0.0.1:6379/0", show_default=True)
@click.option("--prefix", default="wgbench_queue", show_default=True, help="bench Redis key prefix")
@click.option("--out", type=click.Path(path_type=Path), default=OUT_DIR, show_default=True)
def queue(
    events: int | None,
    partitions: int,
    batch: int,
    rate: float | None,
    steady_seconds: float,
    warmup_seconds: float,
    handlers: str,
    villages: int,
    processes: int,
    db: str,
    vs: str | None,
    arq_python: Path,
    arq_events: int,
    db_name: str,
    pg_admin_url: str,
    redis_url: str,
    prefix: str,
    out: Path,
) -> None:
    """Queue: schedule and dispatch rates beside raw ZADD / Lua pop, lateness at a steady load."""
    from bench import queue as q

    async def go() -> None:
        if handlers == "game":
            await q.game_bench(
                events=events or 20_000, villages=villages, partitions=partitions, batch=batch,
                db=db, db_name=db_name, pg_admin_url=pg_admin_url, redis_url=redis_url,
                prefix=prefix, out=out, processes=processes,
            )  # fmt: skip
        else:
            await q.noop_bench(
                events=events or 1_000_000, partitions=partitions, batch=batch, rate=rate,
                steady_seconds=steady_seconds, warmup_seconds=warmup_seconds,
                redis_url=redis_url, prefix=prefix,
                db_name=db_name, out=out, vs_arq=vs == "arq", arq_python=arq_python,
                arq_events=arq_events,
            )  # fmt: skip

    # the in-process task server (and the ceilings beside it) on the loop the gameserver
    # runs on (EVENT_LOOP), so the figures describe what a world runs
    run_async(go, server=True)


@cli.command("all")
@click.option("--villages", type=click.IntRange(100, 50_000_000), default=200_000,
              show_default=True, help="tick world size")  # fmt: skip
@click.option("--events", type=click.IntRange(1000, 100_000_000), default=200_000,
              show_default=True, help="queue events (no-op handlers)")  # fmt: skip
@click.option("--game-events", type=click.IntRange(0, 10_000_000), default=3_000,
              show_default=True, help="march arrivals of the game run (0: skip it)")  # fmt: skip
@click.option(
    "--web-duration", type=click.FloatRange(1, 3600), default=10, show_default=True,
    help="seconds per web phase at 100 connections (half that per sweep point)",
)  # fmt: skip
@click.option(
    "--db", type=click.Choice(["sqlite", "postgresql"]), default="postgresql", show_default=True,
    help="database of the tick and game runs",
)  # fmt: skip
@click.option(
    "--web-db", type=click.Choice(["sqlite", "postgresql"]), default="sqlite", show_default=True
)
@click.option("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL, show_default=True)
@click.option("--redis-url", default="redis://127.0.0.1:6379/0", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=OUT_DIR, show_default=True)
def all_command(
    villages: int,
    events: int,
    game_events: int,
    web_duration: float,
    db: str,
    web_db: str,
    pg_admin_url: str,
    redis_url: str,
    out: Path,
) -> None:
    """Tick, queue and web at moderate sizes (a few minutes): one summary table, one JSON."""
    from bench.all import all_bench

    async def go() -> None:
        await all_bench(
            villages=villages, events=events, game_events=game_events,
            web_duration=web_duration, db=db, web_db=web_db, pg_admin_url=pg_admin_url,
            redis_url=redis_url, out=out,
        )  # fmt: skip

    run_async(go)


@cli.command("push")
@click.option("--channels", type=click.IntRange(1, 100_000), default=10_000, show_default=True,
              help="open event streams on the one web process")  # fmt: skip
@click.option("--rate", type=click.FloatRange(1, 20_000), default=200, show_default=True,
              help="single-player version bumps per second (steady phase)")  # fmt: skip
@click.option("--duration", type=click.FloatRange(1, 3600), default=20, show_default=True,
              help="seconds of the steady phase")  # fmt: skip
@click.option("--burst", type=click.IntRange(1, 100_000), default=1_000, show_default=True,
              help="players bumped together in one burst (a batch of arrivals)")  # fmt: skip
@click.option("--bursts", type=click.IntRange(0, 1000), default=5, show_default=True)
@click.option("--redis-url", default="redis://127.0.0.1:6379/0", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=OUT_DIR, show_default=True)
def push_command(
    channels: int, rate: float, duration: float, burst: int, bursts: int, redis_url: str,
    out: Path,
) -> None:  # fmt: skip
    """Pushed updates: one web process holding N event streams; bump-to-client latency."""
    from bench import report
    from bench.host import load_average
    from bench.push import push_bench

    async def go() -> None:
        load_at_start = load_average()
        summary = await push_bench(channels, rate, duration, burst, bursts, redis_url)
        steady, burst_figures = summary["steady"], summary["bursts"]
        rows = [
            [f"steady ({steady['changes']:,} changes)", steady["p50_ms"], steady["p99_ms"],
             steady["max_ms"], steady["lost"]],
            [f"bursts of {burst:,}", burst_figures["p50_ms"], burst_figures["p99_ms"],
             burst_figures["max_ms"], burst_figures["lost"]],
        ]  # fmt: skip
        title = f"push: {channels:,} streams on one web process, bump -> client (ms)"
        report.print_table(title, rows, ["", "p50", "p99", "max", "lost"])
        rss = summary["web_rss_mb"]
        report.console.print(
            f"web process: RSS {rss['idle']} MB idle, {rss['streams_open']} MB with the streams "
            f"({rss['kb_per_stream']} KB each); CPU {steady['web_cpu_share_of_one_core']:.0%} of "
            f"a core at {rate:,.0f} changes/s ({steady['web_cpu_us_per_change']} µs each); "
            f"target p99 < 1 s met: {summary['target']['met']}"
        )
        machine = report.machine_info(
            {"loadavg_at_start": load_at_start, "loadavg_at_end": load_average()}
        )
        path = report.save_json(out, "push", {"machine": machine, **summary})
        report.console.print(f"wrote {path}")

    run_async(go)


class Terminated(FatalError):
    exit_code = 128 + signal.SIGTERM


@cli.command("world")
@click.option("--start", type=click.IntRange(1, 10_000_000), default=1_000, show_default=True,
              help="players of the first step (doubled while the service levels hold)")  # fmt: skip
@click.option("--max-players", type=click.IntRange(1, 10_000_000), default=200_000,
              show_default=True)  # fmt: skip
@click.option("--bisect", type=click.IntRange(0, 20), default=3, show_default=True,
              help="steps between the last N that held and the first that did not")  # fmt: skip
@click.option("--warmup", type=click.FloatRange(1, 3600), default=20, show_default=True,
              help="seconds before each measured window (players arrive during it)")  # fmt: skip
@click.option("--window", type=click.FloatRange(1, 3600), default=30, show_default=True,
              help="seconds of each measured window")  # fmt: skip
@click.option("--web-workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="K: webfront --workers K")  # fmt: skip
@click.option("--task-servers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="M: gameserver processes")  # fmt: skip
@click.option("--load-processes", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--connections", type=click.IntRange(1, 10_000), default=256, show_default=True,
              help="HTTP connections per load process (event streams not counted)")  # fmt: skip
@click.option("--bots-per-player", type=click.FloatRange(0, 100), default=1.0, show_default=True)
@click.option("--world-speed", type=click.FloatRange(1, 1000), default=100, show_default=True,
              help="WORLD_SPEED: builds and marches end within a window")  # fmt: skip
@click.option("--poll-interval", type=click.FloatRange(0.1, 3600), default=10, show_default=True)
@click.option("--push-share", type=click.FloatRange(0, 1), default=0.25, show_default=True,
              help="players holding GET /api/events open (they poll every 60 s)")  # fmt: skip
@click.option("--command-interval", type=click.FloatRange(0.1, 36_000), default=120,
              show_default=True, help="seconds between a player's builds or trainings")  # fmt: skip
@click.option("--march-interval", type=click.FloatRange(0.1, 36_000), default=600,
              show_default=True)  # fmt: skip
@click.option("--logins-per-day", type=click.FloatRange(0, 100_000), default=1, show_default=True,
              help="password logins per player per day")  # fmt: skip
@click.option("--online-share", type=click.FloatRange(0, 1, min_open=True), default=1,
              show_default=True,
              help="of the world's players online at once; the others idle")  # fmt: skip
@click.option(
    "--db", type=click.Choice(["sqlite", "postgresql"]), default="postgresql", show_default=True
)
@click.option("--db-name", default="wgbench_world", show_default=True, help="bench-owned database")
@click.option("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL, show_default=True)
@click.option("--redis-url", default=None,
              help="an existing Redis (default: an embedded Valkey of the run's own)")  # fmt: skip
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=OUT_DIR, show_default=True)
def world_command(
    start: int, max_players: int, bisect: int, warmup: float, window: float, web_workers: int,
    task_servers: int, load_processes: int, connections: int, bots_per_player: float,
    world_speed: float, poll_interval: float, push_share: float, command_interval: float,
    march_interval: float, logins_per_day: float, online_share: float, db: str, db_name: str,
    pg_admin_url: str, redis_url: str | None, seed: int, out: Path,
) -> None:  # fmt: skip
    """Capacity: the whole stack (K web, M task servers, the tick) under N simulated players;
    the largest N that holds every service level, CPU per player per tier."""
    from bench.world import Plan, PlayerModel, world_bench

    if start > max_players:
        raise click.BadParameter("--start is above --max-players", param_hint="--start")
    plan = Plan(
        start=start, max_players=max_players, bisect=bisect, warmup_s=warmup, window_s=window,
        web_workers=web_workers, task_servers=task_servers, load_processes=load_processes,
        connections=connections, bots_per_player=bots_per_player, world_speed=world_speed,
        seed=seed,
    )  # fmt: skip
    model = PlayerModel(
        poll_interval_s=poll_interval, push_share=push_share,
        command_interval_s=command_interval, march_interval_s=march_interval,
        logins_per_player_day=logins_per_day, online_share=online_share,
    )  # fmt: skip

    async def go() -> None:
        # a SIGTERM ends the run as Ctrl-C does: the stack, the generators, the embedded
        # Valkey and the bench database go with it
        main = asyncio.current_task()
        assert main is not None
        terminated: list[bool] = []

        def terminate() -> None:
            terminated.append(True)
            main.cancel()

        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
        try:
            await world_bench(
                plan, model, db=db, db_name=db_name, pg_admin_url=pg_admin_url,
                redis_url=redis_url, out=out,
            )  # fmt: skip
        except asyncio.CancelledError:
            if not terminated:
                raise
            raise Terminated(
                "stopped by SIGTERM: the processes it started and its database are gone"
            ) from None

    run_async(go)


@cli.command("publish")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--add", is_flag=True,
    help="keep the other published results (default: these files become the published set)",
)  # fmt: skip
@click.option(
    "--published", type=click.Path(file_okay=False, path_type=Path), default=PUBLISHED_DIR,
    show_default=True, help="the committed folder the README table is rendered from",
)  # fmt: skip
def publish_command(files: tuple[Path, ...], add: bool, published: Path) -> None:
    """Copy result JSONs of a real run (e.g. bench/results/*_*.json) to the published folder."""
    from bench.readme import publish

    try:
        copies, dropped = publish(files, published, add=add)
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    for path in copies:
        click.echo(f"published {path}")
    if dropped:  # a re-run of one benchmark is published with --add
        click.echo(f"dropped from the published set: {', '.join(dropped)} (--add keeps the others)")
    click.echo("next: python -m bench readme (and commit both)")


@cli.command("readme")
@click.option(
    "--check", is_flag=True,
    help="change nothing; exit 1 when README.md is not what the published results render",
)  # fmt: skip
@click.option(
    "--readme", "readme_path", type=click.Path(dir_okay=False, path_type=Path), default=README,
    show_default=True,
)  # fmt: skip
@click.option(
    "--published", type=click.Path(file_okay=False, path_type=Path), default=PUBLISHED_DIR,
    show_default=True,
)  # fmt: skip
def readme_command(check: bool, readme_path: Path, published: Path) -> None:
    """Rewrite README.md's results table (between its bench-results markers) from published/."""
    from bench.readme import update_readme

    try:
        changed = update_readme(readme_path, published, check=check)
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    if check:
        click.echo(f"{readme_path} is up to date with {published}")
    else:
        state = "rewrote its results table" if changed else "already up to date"
        click.echo(f"{readme_path}: {state}")


def main() -> None:
    sys.exit(cli())
