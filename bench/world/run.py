"""The step search: measure the whole stack at N players, more while the service levels
hold, then bisect between the last N that held and the first that did not."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from bench import report
from bench.databases import DEFAULT_PG_ADMIN_URL, drop_database, fresh_database
from bench.host import load_average, redis_version, warn_if_busy
from bench.prefix import clear_prefix
from bench.push import raise_fd_limit
from bench.world.floor import (
    TARGET_COMMAND_GATHER_MS,
    Costs,
    Traffic,
    database_costs,
    floor_figures,
    http_cost_at_saturation,
    measure_costs,
    target_figures,
)
from bench.world.model import (
    LIMIT_TITLES,
    REQUEST_KINDS,
    SATURATED,
    SLO,
    PlayerModel,
    first_failed,
    hist_quantile,
    saturated_tiers,
    share_within,
    target_sentence,
    verdicts,
)
from bench.world.stack import (
    PREFIX,
    CpuClock,
    Processes,
    World,
    embedded_redis,
    grow_world,
    histogram_delta,
    map_radius,
    postgres_pids,
    scrape_histograms,
)
from common.errors import FatalError

LATENESS = "gameserver_event_lateness_seconds"
TICK = "tick_shard_seconds"
EVENT_TRANSACTIONS = "gameserver_event_transactions"  # durable transactions of events ...
EVENT_TRANSACTION_EVENTS = "gameserver_event_transaction_events"  # ... and the events they ran
TARGET_PLAYERS = 100_000
SPAWN_S = 2.0  # the generators start together this long after being spawned
SERVER_TIERS = ("web", "task_server", "postgres", "redis")
FLOOR_S = 10.0  # seconds each kind of the floor's traffic runs


@dataclass(frozen=True)
class Plan:
    start: int
    max_players: int
    bisect: int
    warmup_s: float
    window_s: float
    web_workers: int
    task_servers: int
    load_processes: int
    connections: int
    bots_per_player: float
    world_speed: float
    seed: int


def usable_cores(tier: str, processes: int) -> int:
    """Cores a tier can use: one per Python or Redis process, PostgreSQL all of them."""
    cores = os.cpu_count() or 1
    return cores if tier == "postgres" else min(processes, cores)


def busy_share(before: Any, after: Any) -> float:
    """The share of the machine's CPU time that was not idle between two ``cpu_times()``."""
    idle = (after.idle + getattr(after, "iowait", 0.0)) - (
        before.idle + getattr(before, "iowait", 0.0)
    )

    def total(t: Any) -> float:  # guest time is counted in user time already (Linux)
        return float(sum(t)) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

    spent = total(after) - total(before)
    return max(0.0, 1 - idle / spent) if spent > 0 else 0.0


def pushes(k: int, share: float) -> bool:
    """Whether player ``k`` holds the event stream: ``share`` of any run of players do."""
    return int((k + 1) * share) > int(k * share)


def histogram_figures(buckets: list[list[float]]) -> dict[str, Any]:
    pairs = [(le, n) for le, n in buckets]
    return {
        "count": int(pairs[-1][1]) if pairs else 0,
        "p50_s": round(hist_quantile(pairs, 0.50), 4),
        "p99_s": round(hist_quantile(pairs, 0.99), 4),
        "share_within_1s": share_within(pairs, 1.0),
        "buckets": buckets,
    }


def _transactions(counters: dict[str, list[list[float]]]) -> dict[str, Any]:
    """The task servers' durable event transactions in the window, and the events each ran
    (more than one: groups of several partitions gathered, ``common.queue.gathered``)."""
    transactions = sum(n for _, n in counters[EVENT_TRANSACTIONS])
    events = sum(n for _, n in counters[EVENT_TRANSACTION_EVENTS])
    return {
        "count": int(transactions),
        "events": int(events),
        "events_per_transaction": round(events / transactions, 2) if transactions else None,
    }


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The generators' results as one: latencies pooled, counts summed, the worst lag."""
    latency: dict[str, list[float]] = {}
    outcomes: dict[str, dict[str, int]] = {}
    errors: dict[str, int] = {}
    warmup: dict[str, int] = {}
    for part in parts:
        for kind, values in part["latency_ms"].items():
            latency.setdefault(kind, []).extend(values)
        for kind, by in part["outcomes"].items():
            into = outcomes.setdefault(kind, {})
            for outcome, n in by.items():
                into[outcome] = into.get(outcome, 0) + n
        for into, src in ((errors, part["errors"]), (warmup, part["warmup_errors"])):
            for reason, n in src.items():
                into[reason] = into.get(reason, 0) + n
    lag = {q: max(p["start_lag_ms"][q] for p in parts) for q in ("p50", "p90", "p99", "max")}
    return {
        "latency": latency,
        "outcomes": outcomes,
        "errors": errors,
        "warmup_errors": warmup,
        "start_lag_ms": lag,
        "started": sum(p["started"] for p in parts),
        "streams": sum(p["streams"] for p in parts),
        "streams_open_at_end": sum(p["streams_open_at_end"] for p in parts),
        "stream_events": sum(p["stream_events"] for p in parts),
    }


class Bench:
    def __init__(self, plan: Plan, model: PlayerModel, world: World, procs: Processes) -> None:
        self.plan, self.model, self.world, self.procs = plan, model, world, procs
        self.folder = Path(tempfile.mkdtemp(prefix="bench-world-"))

    def generator_result(self, g: int) -> Path:
        return self.folder / f"load{g}.result.json"

    async def measure(self, n: int, redis_pids: list[int]) -> dict[str, Any]:
        plan, model = self.plan, self.model
        online = model.online(n)
        some = f" ({online:,} online)" if online < n else ""
        report.console.print(f"world: {n:,} players{some} ...", highlight=False)
        await grow_world(self.world, n, plan.bots_per_player, model.rich_share, plan.seed)
        players = self.world.players[:online]  # the others are in the world, idle
        start_at = time.time() + SPAWN_S
        gens: list[asyncio.subprocess.Process] = []
        try:
            for g in range(plan.load_processes):
                mine = players[g :: plan.load_processes]
                spec = {
                    "url": self.procs.url, "seed": plan.seed * 1000 + g, "model": model.as_dict(),
                    "warmup_s": plan.warmup_s, "window_s": plan.window_s, "start_at": start_at,
                    "connections": plan.connections,
                    "players": [
                        {"player_id": p.player_id, "name": p.name, "token": p.token,
                         "village_id": p.village_id, "target": [p.target_x, p.target_y],
                         "push": pushes(i * plan.load_processes + g, model.push_share)}
                        for i, p in enumerate(mine)
                    ],
                }  # fmt: skip
                path = self.folder / f"load{g}.json"
                path.write_text(json.dumps(spec))
                gens.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "bench.world",
                        "load",
                        str(path),
                        str(self.generator_result(g)),
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.PIPE,
                    )
                )
            return await self._measured(n, gens, redis_pids, start_at)
        finally:
            for proc in gens:  # still running only if the run was cancelled or one failed
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    async def _measured(
        self, n: int, gens: list[asyncio.subprocess.Process], redis_pids: list[int],
        start_at: float,
    ) -> dict[str, Any]:  # fmt: skip
        """The window of step ``n``: CPU, histograms and the generators' results."""
        plan = self.plan
        tiers = {
            "web": self.procs.web_pids,
            "task_server": self.procs.task_pids,
        }
        if redis_pids:
            tiers["redis"] = lambda: redis_pids
        if self.world.db.kind == "postgresql":
            tiers["postgres"] = postgres_pids(self.world.db.name)
        clock = CpuClock(tiers)
        names = (LATENESS, TICK, EVENT_TRANSACTIONS, EVENT_TRANSACTION_EVENTS)
        urls = self.procs.metrics_urls()
        await asyncio.sleep(max(0.0, start_at + plan.warmup_s - time.time()))
        cpu_before = clock.read()
        machine_before = psutil.cpu_times()
        wall_before = time.perf_counter()
        hist_before = await asyncio.to_thread(scrape_histograms, urls, names)
        dropped_before = await asyncio.to_thread(self.procs.streams_dropped)
        await asyncio.sleep(max(0.0, start_at + plan.warmup_s + plan.window_s - time.time()))
        cpu_after = clock.read()
        machine = busy_share(machine_before, psutil.cpu_times())
        wall = time.perf_counter() - wall_before
        hist_after = await asyncio.to_thread(scrape_histograms, urls, names)
        dropped_after = await asyncio.to_thread(self.procs.streams_dropped)
        parts = []
        for g, proc in enumerate(gens):
            _, err = await proc.communicate()
            if proc.returncode != 0:
                tail = err.decode(errors="replace").strip().splitlines()[-3:]
                raise FatalError(f"a load generator failed: {' | '.join(tail)}")
            parts.append(json.loads(self.generator_result(g).read_text()))
        hists = {name: histogram_delta(hist_before[name], hist_after[name]) for name in names}
        used = CpuClock.used(cpu_before, cpu_after)
        # each generator reads its own (``bench.world.load``): it may be gone by now
        used["load_generator"] = (sum(part["cpu_s"] for part in parts), len(parts))
        loads = combine(parts)
        if dropped_before is not None and dropped_after is not None:
            loads["streams_dropped_by_server"] = int(dropped_after - dropped_before)
        return self.step(n, loads, used, wall, hists, machine)

    def step(
        self,
        n: int,
        loads: dict[str, Any],
        cpu_used: dict[str, tuple[float, int]],
        wall: float,
        hists: dict[str, list[list[float]]],
        machine_busy: float,
    ) -> dict[str, Any]:
        window = self.plan.window_s
        latency = {k: report.percentiles(v) for k, v in loads["latency"].items()}
        for kind in ("poll", "command"):
            latency.setdefault(kind, report.percentiles([]))
        requests = {k: len(v) for k, v in loads["latency"].items()}
        cpu = {}
        for tier, (seconds, procs) in cpu_used.items():
            cores = seconds / wall
            cpu[tier] = {
                "cpu_seconds": round(seconds, 3),
                "processes": procs,
                "cores": round(cores, 3),
                "share_of_usable_cores": round(cores / usable_cores(tier, procs), 3),
                "millicores_per_player": round(cores * 1000 / n, 4),
            }
        total = sum(len(v) for k, v in loads["latency"].items() if k in REQUEST_KINDS)
        step: dict[str, Any] = {
            "players": n,  # in the world; per player figures are per one of these
            "online": self.model.online(n),  # of them, played by the load generators
            "requests": requests,
            "requests_per_s": round(total / window, 1),
            "latency_ms": latency,
            "outcomes": loads["outcomes"],
            "errors": {"total": sum(loads["errors"].values()), "by_reason": loads["errors"]},
            "warmup_errors": loads["warmup_errors"],
            "event_lateness": histogram_figures(hists[LATENESS]),
            "tick_shard": histogram_figures(hists[TICK]),
            "event_transactions": _transactions(hists),
            "cpu": cpu,
            "load_generator": {"start_lag_ms": loads["start_lag_ms"],
                               "requests_started": loads["started"]},
            "streams": {"players": loads["streams"], "open_at_end": loads["streams_open_at_end"],
                        "events_received": loads["stream_events"],
                        # by the web tier, for falling behind (None: not known, see
                        # Processes.streams_dropped)
                        "dropped_by_server": loads.get("streams_dropped_by_server")},
        }  # fmt: skip
        held = verdicts(step)
        step["slo_held"] = held
        step["ok"] = all(held.values())
        step["first_failed"] = first_failed(held)
        step["machine_cpu"] = {
            "busy_share": round(machine_busy, 3),  # every process on the machine, ours or not
            "ours_cores": round(sum(c["cores"] for c in cpu.values()), 3),
        }
        step["saturated_tiers"] = saturated_tiers(cpu)
        if machine_busy >= SATURATED:
            step["saturated_tiers"].append("machine")
        lat, late, tick = step["latency_ms"], step["event_lateness"], step["tick_shard"]
        verdict = "held" if step["ok"] else f"MISSED {step['first_failed']}"
        report.console.print(
            f"  poll p99 {lat['poll']['p99']:.0f} ms, command p99 "
            f"{lat['command']['p99']:.0f} ms, lateness p99 {late['p99_s']:.3f} s "
            f"({late['count']:,} events, "
            f"{step['event_transactions']['events_per_transaction'] or 0:.1f} a transaction), "
            f"tick p99 {tick['p99_s']:.3f} s, errors "
            f"{step['errors']['total']}: {verdict}",
            highlight=False,
        )
        return step


def next_players(steps: list[dict[str, Any]], plan: Plan) -> int | None:
    """Double from ``start`` while steps hold; then bisect ``plan.bisect`` times."""
    held = [s["players"] for s in steps if s["ok"]]
    missed = [s["players"] for s in steps if not s["ok"]]
    if not missed:
        last = steps[-1]["players"]
        return None if last >= plan.max_players else min(plan.max_players, last * 2)
    lo, hi = max(held, default=0), min(missed)
    bisected = len(steps) - 1 - steps.index(next(s for s in steps if not s["ok"]))
    mid = (lo + hi) // 2
    if bisected >= plan.bisect or mid <= lo or hi - lo <= max(1, hi // 20):
        return None
    return mid


def basis_step(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The step CPU per player is taken from: the largest that held, else the smallest."""
    held = [s for s in steps if s["ok"]]
    if held:
        return max(held, key=lambda s: s["players"])
    return min(steps, key=lambda s: s["players"])


def summarize(steps: list[dict[str, Any]], plan: Plan) -> dict[str, Any]:
    missed = sorted((s for s in steps if not s["ok"]), key=lambda s: s["players"])
    basis = basis_step(steps)
    best = basis if basis["ok"] else None
    cores = os.cpu_count() or 1
    per_player = {t: c["millicores_per_player"] for t, c in basis["cpu"].items()}
    servers = sum(v for t, v in per_player.items() if t in SERVER_TIERS)
    everything = servers + per_player.get("load_generator", 0.0)
    if missed:
        first = missed[0]
        name = first["first_failed"]
        limit = {
            "slo": name, "title": LIMIT_TITLES[name], "at_players": first["players"],
            "saturated_tiers": first["saturated_tiers"],
        }  # fmt: skip
    else:
        limit = {
            "slo": None, "title": f"none up to --max-players {plan.max_players:,}",
            "at_players": None, "saturated_tiers": basis["saturated_tiers"],
        }  # fmt: skip
    max_players = best["players"] if best else 0
    return {
        "max_players": max_players,
        "max_players_online": best["online"] if best else 0,
        "first_limit": limit,
        "cpu_millicores_per_player": per_player,
        "cpu_basis_players": basis["players"],
        "projection": {
            # linear in N from the basis step: CPU per player stays flat only while no
            # tier saturates; a projection, never a measurement
            "players_on_these_cores_servers_only": int(cores * 1000 / servers) if servers else None,
            "players_on_these_cores_with_generator": int(cores * 1000 / everything)
            if everything
            else None,
        },
        "target": {"players": TARGET_PLAYERS, "met": max_players >= TARGET_PLAYERS},
    }


async def world_bench(
    plan: Plan,
    model: PlayerModel,
    *,
    db: str,
    db_name: str,
    pg_admin_url: str = DEFAULT_PG_ADMIN_URL,
    redis_url: str | None,
    out: Path,
) -> dict[str, Any]:
    load_at_start = load_average()
    warn_if_busy(load_at_start)
    streams = int(model.online(plan.max_players) * model.push_share) + 1
    wanted = streams * 2 + 4 * plan.connections * plan.load_processes + 4096
    if raise_fd_limit(wanted) < wanted:
        report.console.print(
            f"[yellow]note: the open-file limit is below the {wanted:,} the largest step may "
            "need (ulimit -Hn): its streams would fail as errors[/yellow]"
        )
    embedded = embedded_redis() if redis_url is None else None
    url = embedded.url if embedded else str(redis_url)
    # an external Redis serves others too: its CPU is not this run's to report
    redis_pids = [embedded.process.pid] if embedded and embedded.process else []
    radius = map_radius(int(plan.max_players * (1 + plan.bots_per_player)))
    from redis.asyncio import Redis

    redis = Redis.from_url(url)
    prefix = f"{PREFIX}_{secrets.token_hex(4)}"  # two runs on one Redis never meet
    database = None
    procs = None
    steps: list[dict[str, Any]] = []
    floor: Floor | None = None
    try:
        database = await fresh_database(
            db, db_name, url, pg_admin_url, redis_prefix=prefix, world_speed=plan.world_speed,
            map_radius=radius,
        )  # fmt: skip
        env = {
            "DATABASE_URL": database.settings.database_url, "REDIS_URL": url,
            "REDIS_PREFIX": prefix, "WORLD_SPEED": str(plan.world_speed),
            "MAP_RADIUS": str(radius), "TRUSTED_PROXIES": "127.0.0.1", "LOG_LEVEL": "WARNING",
            "PUSH_MAX_CHANNELS": str(max(20_000, streams + 100)),
        }  # fmt: skip
        procs = Processes(env, plan.web_workers, plan.task_servers)
        world = World(database, url)
        await grow_world(world, plan.start, plan.bots_per_player, model.rich_share, plan.seed)
        procs.start()
        await procs.wait_ready()
        bench = Bench(plan, model, world, procs)
        n: int | None = plan.start
        while n is not None:
            steps.append(await bench.measure(n, redis_pids))
            n = next_players(steps, plan)
        version = await redis_version(url)
        from bench.host import db_version

        db_ver = await db_version(database.engine)
        procs.stop()  # the floor is measured on a quiet machine
        procs = None
        floor = await measure_floor(plan, model, world, basis_step(steps))
    finally:
        if procs is not None:
            procs.stop()
        if database is not None:
            await drop_database(database, pg_admin_url)
        await clear_prefix(redis, prefix)
        await redis.aclose()
        if embedded is not None:
            embedded.stop()
    summary = summarize(steps, plan)
    if floor is not None:
        cores = os.cpu_count() or 1
        summary["floor"] = {
            **floor_figures(floor.traffic, floor.costs, summary["cpu_millicores_per_player"],
                            cores),
            "at_target": target_figures(floor.target, floor.target_costs, cores),
        }  # fmt: skip
    setup = {
        "db": db, "web_processes": plan.web_workers, "task_servers": plan.task_servers,
        "load_processes": plan.load_processes, "connections_per_load_process": plan.connections,
        "bots_per_player": plan.bots_per_player, "world_speed": plan.world_speed,
        "warmup_s": plan.warmup_s, "window_s": plan.window_s, "start_players": plan.start,
        "max_players": plan.max_players, "redis": "embedded" if embedded else "external",
    }  # fmt: skip
    print_summary(steps, summary)
    figures = {
        "setup": setup, "model": model.as_dict(), "slo": SLO, "steps": steps, **summary,
        "requests_per_player_s": round(model.requests_per_player_s(), 4),
    }  # fmt: skip
    name = model.result_name()
    figures["plot"] = str(report.save_plot(out, name, lambda ax: draw(ax, steps)))
    machine = report.machine_info(
        {"redis": version, "database": db_ver, "loadavg_at_start": load_at_start,
         "loadavg_at_end": load_average()}
    )  # fmt: skip
    figures["json"] = str(report.save_json(out, name, {"machine": machine, **figures}))
    report.console.print(f"wrote {figures['json']} and {figures['plot']}", highlight=False)
    return figures


@dataclass(frozen=True)
class Floor:
    traffic: Traffic  # the basis step's
    costs: Costs  # on bare parts, at its rates
    target: Traffic  # the same per player, for TARGET_PLAYERS
    target_costs: Costs  # each kind on bare parts at its cheapest (``floor.target_figures``)


async def measure_floor(
    plan: Plan, model: PlayerModel, world: World, basis: dict[str, Any]
) -> Floor | None:
    """The basis step's traffic and its cost on bare parts (``bench.world.floor``), and the
    target's; None on SQLite, which has no server process whose CPU the bare
    statements could be read from."""
    db = world.db
    if db.kind != "postgresql":
        return None
    # a window holds a handful of logins, if any: they come at the model's mean rate
    logins = basis["players"] * model.logins_per_player_day / 86_400
    traffic = replace(Traffic.of(basis, plan.window_s), logins_per_s=logins)
    report.console.print(
        f"world: the floor of {traffic.players:,} players' traffic on bare parts ...",
        highlight=False,
    )
    dsn = db.settings.database_url.replace("postgresql+asyncpg://", "postgresql://")
    players = world.players[: traffic.players]
    seconds = min(FLOOR_S, plan.window_s / 2)
    costs = await measure_costs(
        traffic, dsn=dsn, game=db.settings.game, players=players, web_workers=plan.web_workers,
        task_servers=plan.task_servers, seconds=seconds,
    )  # fmt: skip
    target = traffic.scaled(TARGET_PLAYERS)
    http = await http_cost_at_saturation(plan.web_workers, seconds)
    target_costs = await database_costs(
        target, dsn=dsn, game=db.settings.game, players=players, web_workers=plan.web_workers,
        task_servers=plan.task_servers, seconds=seconds, http=http,
        password_hash=costs.password_hash, command_windows=(TARGET_COMMAND_GATHER_MS,),
    )  # fmt: skip
    return Floor(traffic, costs, target, target_costs)


def print_summary(steps: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    rows = []
    for s in sorted(steps, key=lambda s: s["players"]):
        lat = s["latency_ms"]
        rows.append([
            s["players"], s["online"], lat["poll"]["p99"], lat["command"]["p99"],
            s["event_lateness"]["p99_s"] * 1000, s["tick_shard"]["p99_s"] * 1000,
            s["errors"]["total"], *(s["cpu"].get(t, {}).get("cores", 0.0)
                                    for t in (*SERVER_TIERS, "load_generator")),
            "held" if s["ok"] else f"MISSED {s['first_failed']}",
        ])  # fmt: skip
    report.print_table(
        "world: the whole stack at N players (p99 ms; CPU in cores)",
        rows,
        ["players", "online", "poll", "command", "lateness", "tick shard", "errors", "web", "task",
         "postgres", "redis", "load gen", ""],
    )  # fmt: skip
    limit = summary["first_limit"]
    report.console.print(
        f"largest N holding every service level: {summary['max_players']:,}"
        + (f" ({online:,} online)" if (online := summary["max_players_online"]) and
           online < summary["max_players"] else "")
        + f"; first limit: {limit['title']}"
        + (f" at {limit['at_players']:,}" if limit["at_players"] else "")
        + (f" (saturated: {', '.join(limit['saturated_tiers'])})" if limit["saturated_tiers"]
           else ""),
        highlight=False,
    )  # fmt: skip
    floor = summary.get("floor")
    if floor is not None and floor["players_on_these_cores"]:
        mc = floor["millicores_per_player"]
        report.console.print(
            f"floor: the same traffic on bare parts, {sum(mc.values()):.3g} millicores per "
            f"player (web {mc['web']:.3g}, task {mc['task_server']:.3g}, PostgreSQL "
            f"{mc['postgres']:.3g}): {floor['players_on_these_cores']:,} players on these "
            f"cores at most; the stack's servers use {floor['ours_to_floor']:g} x the floor",
            highlight=False,
        )
        report.console.print(target_sentence(floor["at_target"]), highlight=False)


def draw(ax: Any, steps: list[dict[str, Any]]) -> None:
    ordered = sorted(steps, key=lambda s: s["players"])
    xs = [s["players"] for s in ordered]
    lines = (
        ("poll p99", [s["latency_ms"]["poll"]["p99"] for s in ordered], SLO["poll_p99_ms"]),
        ("command p99", [s["latency_ms"]["command"]["p99"] for s in ordered],
         SLO["command_p99_ms"]),
        ("event lateness p99", [s["event_lateness"]["p99_s"] * 1000 for s in ordered],
         SLO["event_lateness_p99_s"] * 1000),
        ("tick shard p99", [s["tick_shard"]["p99_s"] * 1000 for s in ordered],
         SLO["tick_shard_p99_s"] * 1000),
    )  # fmt: skip
    for label, ys, bound in lines:
        (line,) = ax.plot(xs, [max(y, 0.01) for y in ys], marker="o", label=label)
        ax.axhline(bound, color=line.get_color(), linestyle="--", linewidth=0.8)
    for s in ordered:
        if not s["ok"]:
            ax.axvline(s["players"], color="red", alpha=0.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("players in the world (red: a service level missed)")
    ax.set_ylabel("ms (dashed: the service level)")
    ax.set_title("the whole stack: latency against players")
    ax.legend(fontsize="small")
