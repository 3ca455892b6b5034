"""One chaos run, start to summary: servers, world, players, faults, drain, checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import shutil
import signal
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chaos.checks import Baseline, Check, CheckReport, read_baseline, run_checks
from chaos.cluster import Stack, StackConfig
from chaos.faults import BOUNDED_PLAN, FULL_PLAN, FaultInjector, FaultRecord, Timeline
from chaos.players import Population, PopulationConfig, now_ms
from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue
from common.snapshot_versions import bump_versions
from db.models import ScheduledEvent
from refgame.models import March, Troop
from refgame.resources import STOCKS
from refgame.units import total_upkeep

log = logging.getLogger("chaos")

GIFTS = {  # troops given through SQL before the load (human players start without any)
    "raider": {"legionnaire": 60, "praetorian": 20, "imperian": 60, "equites_imperatoris": 30},
    "fortress": {"legionnaire": 30, "praetorian": 30},
}


@dataclass
class RunConfig:
    minutes: float = 10.0  # the whole run, setup to summary
    load_s: float | None = None  # the load phase; by default what the minutes leave
    raiders: int = 80
    fortresses: int = 40
    bots: int = 3000
    world_speed: float = 100.0
    think_s: tuple[float, float] = (1.5, 4.5)
    max_leg_ms: int = 45_000
    plan: str = "full"  # or "bounded"
    pause_s: float = 20.0  # SIGSTOP length: past the default 15 s claim lease
    gameserver_args: tuple[str, ...] = ()
    drain_timeout_s: float = 240.0
    grace_ms: int = 2_000
    replay_sample: int = 25
    seed: int = 7
    known_bug_garbage: bool = False  # also inject the queue entries that used to break it
    workdir: Path | None = None
    keep: bool = False

    @classmethod
    def bounded(cls, **changes: Any) -> RunConfig:
        """The CI version: small, fast world; short leases so a pause outlives them."""
        base = cls(
            minutes=2.6,
            load_s=70.0,
            raiders=12,
            fortresses=6,
            bots=500,
            world_speed=300.0,
            think_s=(0.8, 2.0),
            max_leg_ms=12_000,
            plan="bounded",
            pause_s=6.0,
            gameserver_args=("--claim-lease-ms", "3000", "--partition-lease-ms", "2000"),
            drain_timeout_s=60.0,
            replay_sample=10,
        )
        for k, v in changes.items():
            setattr(base, k, v)
        return base


@dataclass
class Summary:
    run_dir: str
    seconds: dict[str, float] = field(default_factory=dict)
    world: dict[str, Any] = field(default_factory=dict)
    faults: list[FaultRecord] = field(default_factory=list)
    fault_counts: dict[str, int] = field(default_factory=dict)
    fault_errors: list[str] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    commands: dict[str, int] = field(default_factory=dict)
    http: dict[str, int] = field(default_factory=dict)
    transport_errors: dict[str, int] = field(default_factory=dict)
    events_run: dict[str, int] = field(default_factory=dict)
    activity: dict[str, int] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    @property
    def violations(self) -> int:
        return (
            sum(int(c["violation_count"]) for c in self.checks)
            + len(self.fault_errors)
            + len(self.unexpected_exits)
        )

    def as_json(self) -> str:
        data = asdict(self)
        data["violations"] = self.violations
        return json.dumps(data, indent=2, default=str)


def _map_radius(villages: int) -> int:
    """A map about 70 % full: neighbours are a few fields away."""
    return max(8, math.ceil((math.sqrt(villages / 0.7) - 1) / 2))


async def _gift_troops(engine: AsyncEngine, population: Population, redis_url: str,
                       prefix: str) -> None:  # fmt: skip
    """Give every player troops (settle first, then lower the net crop by their upkeep)."""
    now = now_ms()
    async with engine.begin() as conn:
        villages = [p.info.village_id for p in population.players]
        await STOCKS.settle(conn, villages, now)
        rows: list[dict[str, Any]] = []
        for p in population.players:
            gift = GIFTS[p.info.role]
            rows.extend(
                {"village_id": p.info.village_id, "home_village_id": p.info.village_id,
                 "unit": u, "count": n}
                for u, n in gift.items()
            )  # fmt: skip
            await conn.execute(
                update(STOCKS.table)
                .where(STOCKS.c.village_id == p.info.village_id)
                .values(crop_rate=STOCKS.c.crop_rate - total_upkeep(gift))
            )
        await conn.execute(insert(Troop), rows)
    redis = Redis.from_url(redis_url)
    try:
        await bump_versions(redis, prefix, [p.info.player_id for p in population.players], now)
    finally:
        await redis.aclose()


class Monitor:
    """Samples marches in flight and pending events; restarts a process that died unbidden."""

    def __init__(self, engine: AsyncEngine, stack: Stack, faults: FaultInjector) -> None:
        self.engine = engine
        self.stack = stack
        self.faults = faults
        self.timeline = Timeline()
        self.unexpected: list[str] = []

    async def run(self, stop: asyncio.Event, started: float) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await stop.wait()
            try:
                async with self.engine.connect() as conn:
                    marches = (await conn.execute(select(func.count()).select_from(March))).scalar()
                    pending = (
                        await conn.execute(select(func.count()).select_from(ScheduledEvent))
                    ).scalar()
                self.timeline.samples.append(
                    (time.monotonic() - started, int(marches or 0), int(pending or 0))
                )
            except Exception:  # PostgreSQL is restarting
                pass
            for service in self.stack.services():
                if not service.alive() and service.name not in self.faults.down:
                    code = service.process.returncode if service.process else None
                    self.unexpected.append(f"{service.name} exited on its own (code {code})")
                    log.error("%s exited on its own (code %s): restarting", service.name, code)
                    service.start()


async def _drain(engine: AsyncEngine, stack: Stack, deadline: float) -> tuple[bool, int]:
    """Wait until nothing is due in the DB or in Redis; (drained, rows still pending later)."""
    redis = Redis.from_url(stack.redis.url)
    queue = EventQueue(
        redis,
        prefix=stack.config.redis_prefix,
        partitions=stack.config.queue_partitions,
        clock=SYSTEM_CLOCK,
    )
    try:
        while True:
            horizon = now_ms() + int(max(0.0, deadline - time.monotonic()) * 1000)
            try:
                async with engine.connect() as conn:
                    due_soon = (
                        await conn.execute(
                            select(func.count()).where(ScheduledEvent.due_ms <= horizon)
                        )
                    ).scalar()
                    later = (
                        await conn.execute(
                            select(func.count()).where(ScheduledEvent.due_ms > horizon)
                        )
                    ).scalar()
                stats = await queue.stats()
                busy = sum(s.ready + s.inflight for s in stats)
                if not due_soon and not busy:
                    return True, int(later or 0)
            except Exception as exc:
                log.warning("drain: %s", exc)
            if time.monotonic() > deadline:
                return False, int(later or 0)
            await asyncio.sleep(1.0)
    finally:
        await queue.aclose()
        await redis.aclose()


async def run(config: RunConfig) -> Summary:
    started = time.monotonic()
    root = config.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    summary = Summary(str(root))
    villages = config.bots + config.raiders + config.fortresses
    stack = Stack(
        root,
        StackConfig(
            world_speed=config.world_speed,
            map_radius=_map_radius(villages),
            gameserver_args=config.gameserver_args,
        ),
    )
    population: Population | None = None
    engine: AsyncEngine | None = None
    try:
        await asyncio.to_thread(stack.start_servers)
        await asyncio.to_thread(stack.wgctl, "migrate")
        await asyncio.to_thread(
            stack.wgctl, "worldgen", "--players", str(config.bots), "--seed", str(config.seed)
        )
        await asyncio.to_thread(stack.start_processes)
        engine = create_async_engine(
            stack.database_url.replace("postgresql://", "postgresql+asyncpg://"),
            pool_pre_ping=True,
            hide_parameters=True,
        )
        population = Population(
            PopulationConfig(
                raiders=config.raiders,
                fortresses=config.fortresses,
                think_s=config.think_s,
                max_leg_ms=config.max_leg_ms,
                world_speed=config.world_speed,
                seed=config.seed,
            ),
            stack.base_urls,
        )
        await population.register_all()
        await _gift_troops(engine, population, stack.redis.url, stack.config.redis_prefix)
        baseline: Baseline = await read_baseline(engine, now_ms())
        await population.locate()
        summary.world = {
            "villages": len(baseline.stock),
            "bots": config.bots,
            "players": len(population.players),
            "map_radius": stack.config.map_radius,
            "world_speed": config.world_speed,
            "webfronts": len(stack.webfronts),
            "gameservers": len(stack.gameservers),
            "queue_partitions": stack.config.queue_partitions,
        }
        summary.seconds["setup"] = time.monotonic() - started

        # the drain takes about one march there and back after the last command
        drain_reserve = 1.5 * config.max_leg_ms / 1000 + 20
        load_s = config.load_s or max(
            60.0, config.minutes * 60 - summary.seconds["setup"] - drain_reserve - 10
        )
        plan = FULL_PLAN if config.plan == "full" else BOUNDED_PLAN
        faults = FaultInjector(
            stack,
            plan,
            load_s,
            pause_s=config.pause_s,
            seed=config.seed,
            known_bugs=config.known_bug_garbage,
        )
        monitor = Monitor(engine, stack, faults)
        stop = asyncio.Event()
        load_started = time.monotonic()
        tasks = [
            asyncio.create_task(population.run(stop), name="population"),
            asyncio.create_task(faults.run(stop), name="faults"),
            asyncio.create_task(monitor.run(stop, load_started), name="monitor"),
        ]
        await asyncio.sleep(load_s)
        stop.set()
        async with asyncio.timeout(300):  # players finish the command in hand
            await asyncio.gather(*tasks, return_exceptions=True)
        summary.seconds["load"] = time.monotonic() - load_started
        for service in stack.services():  # a fault left nothing stopped or dead
            service.signal(signal.SIGCONT)
            if not service.alive():
                service.start()

        drain_started = time.monotonic()
        unresolved = await population.resolve()
        replays = await population.replay_sample(config.replay_sample)
        drained, later = await _drain(engine, stack, time.monotonic() + config.drain_timeout_s)
        await asyncio.sleep(config.grace_ms / 1000)
        summary.seconds["drain"] = time.monotonic() - drain_started

        check_started = time.monotonic()
        report, final, world = await run_checks(
            engine=engine,
            baseline=baseline,
            ledger=population.ledger,
            speed=config.world_speed,
            now_ms=now_ms(),
            grace_ms=config.grace_ms,
            garbage=faults.garbage.written,
            redis_url=stack.redis.url,
            redis_prefix=stack.config.redis_prefix,
            partitions=stack.config.queue_partitions,
            log_dir=root,
            extra_logs=(stack.pg.log, stack.redis.root / "redis.log"),
        )
        drain_check = Check(
            "drained",
            "after the load, everything due ran within the drain timeout (Redis and DB)",
            checked=1,
        )
        if not drained:
            drain_check.fail(f"not drained after {config.drain_timeout_s:.0f} s")
        if later:
            drain_check.notes.append(f"{later} events due after the drain (e.g. starvation)")
        report = CheckReport([*report.checks, drain_check])
        summary.checks = report.as_dict()
        details = {c.name: c.details for c in report.checks if c.details}
        if details:
            (root / "details.json").write_text(json.dumps(details, indent=1, default=str))
        summary.seconds["checks"] = time.monotonic() - check_started

        ledger = population.ledger
        commands: Counter[str] = Counter()
        for cmd in ledger.commands:
            label = "ok" if cmd.ok else (cmd.code or "unresolved")
            commands[f"{cmd.path} {label}"] += 1
            if cmd.uncertain:
                commands["(answered after a failed attempt)"] += 1
            if cmd.replayed:
                commands["(answered by an idempotent replay)"] += 1
        summary.commands = dict(sorted(commands.items()))
        summary.http = dict(sorted(ledger.http.items()))
        summary.transport_errors = dict(ledger.transport_errors)
        summary.events_run = dict(Counter(kind for _, kind, _, _ in final.processed))
        summary.activity = {
            "commands_sent": len(ledger.commands),
            "commands_unresolved_after_load": unresolved,
            "idempotent_replays_checked": replays,
            "marches_sent": len(world.sent),
            "marches_recalled": sum(1 for s in world.sent.values() if s.recalled_at_ms),
            "max_marches_in_flight": monitor.timeline.max_marches,
            "battles": len(world.battles),
            "reinforcements_arrived": len(world.reinforcements),
            "builds_committed": len(world.builds),
            "trainings_committed": len(world.trains),
            "trades_sent": len(world.trades),
            "trades_arrived": len(world.trade_reports),
            "garbage_entries": len(faults.garbage.written),
            "population_script_errors": population.script_errors,
        }
        summary.faults = faults.records
        summary.fault_counts = faults.counts()
        summary.fault_errors = faults.errors
        summary.unexpected_exits = monitor.unexpected
    finally:
        if population is not None:
            await population.close()
        if engine is not None:
            await engine.dispose()
        summary.exit_codes = await asyncio.to_thread(stack.stop)
        summary.seconds["total"] = time.monotonic() - started
        (root / "summary.json").write_text(summary.as_json())
        if not config.keep and summary.violations == 0 and summary.checks:
            stack.pg.remove()
            shutil.rmtree(root / "redis", ignore_errors=True)
    return summary


def format_summary(summary: Summary) -> str:
    lines = [f"chaos run in {summary.run_dir}"]
    secs = ", ".join(f"{k} {v:.0f} s" for k, v in summary.seconds.items())
    lines.append(f"time: {secs}")
    lines.append("world: " + ", ".join(f"{k} {v}" for k, v in summary.world.items()))
    lines.append("faults injected: " + ", ".join(f"{k} {v}" for k, v in
                                                 summary.fault_counts.items()))  # fmt: skip
    for f in summary.faults:
        lines.append(f"  {f.at_s:6.1f} s  {f.kind:22} {f.detail} ({f.duration_s:.1f} s)")
    for e in summary.fault_errors:
        lines.append(f"  FAULT FAILED: {e}")
    for e in summary.unexpected_exits:
        lines.append(f"  UNEXPECTED EXIT: {e}")
    lines.append("activity: " + ", ".join(f"{k} {v}" for k, v in summary.activity.items()))
    lines.append("events run: " + ", ".join(f"{k} {v}" for k, v in
                                            sorted(summary.events_run.items())))  # fmt: skip
    lines.append(f"events run in total: {sum(summary.events_run.values())}")
    lines.append("commands: " + ", ".join(f"{k} {v}" for k, v in summary.commands.items()))
    if summary.transport_errors:
        lines.append("client-side transport errors (retried): " + ", ".join(
            f"{k} {v}" for k, v in summary.transport_errors.items()))  # fmt: skip
    lines.append("invariants:")
    for c in summary.checks:
        mark = "ok  " if not c["violation_count"] else "FAIL"
        lines.append(f"  {mark} {c['name']:38} checked {c['checked']:>7}  "
                     f"violations {c['violation_count']}")  # fmt: skip
        for v in c["violations"]:
            lines.append(f"         - {v}")
        for n in c["notes"][:5]:
            lines.append(f"         note: {n}")
    lines.append(f"VIOLATIONS: {summary.violations}")
    return "\n".join(lines)
