"""The stack an operator runs, started by the bench: Redis, the database, ``webfront
--workers K`` and M ``gameserver`` processes (the console scripts, as the Procfile names
them), the world generated in bulk, sessions minted as a login mints them."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select, text, update

from bench.databases import BenchDatabase
from bench.host import backend_pids
from common.clock import SYSTEM_CLOCK
from common.embedded_redis import EmbeddedRedis
from common.errors import FatalError
from common.fastredis import FastRedis
from db.models import Player, Village
from db.worldgen import generate_world
from gameapi.loading import load_game
from gameapi.stocks import stocks_of
from webfront.passwords import HashParams, hash_password
from webfront.sessions import SessionStore

PASSWORD = "bench-world-password-1"
PLENTY = 10**15  # fixed-point units: a rich player never runs out
PREFIX = "wgbench_world"
SESSIONS_AT_ONCE = 32


@dataclass(frozen=True)
class SimPlayer:
    """One simulated player: its session, village and the bot village it raids."""

    player_id: int
    name: str
    token: str
    village_id: int
    target_x: int
    target_y: int


@dataclass
class World:
    """The generated world: players in id order (the first N take part in a step)."""

    db: BenchDatabase
    redis_url: str
    players: list[SimPlayer] = field(default_factory=list)
    bots: int = 0

    @property
    def villages(self) -> int:
        return len(self.players) + self.bots


def map_radius(villages: int) -> int:
    """A square map where villages fill a quarter of the spots (room for raids nearby)."""
    return max(20, math.ceil(math.sqrt(villages * 4) / 2))


async def grow_world(
    world: World, players: int, bots_per_player: float, rich_share: float, seed: int
) -> None:
    """Add players (and bots) until the world has ``players`` players: bulk rows from
    ``db.worldgen``, sessions from ``SessionStore.create`` (what a login calls)."""
    have = len(world.players)
    if players <= have:
        return
    settings = world.db.settings
    engine = world.db.engine
    game = load_game(settings.game)
    stocks = stocks_of(game)
    template = game.new_place(settings.world_speed, True)  # with troops: players raid
    password_hash = hash_password(PASSWORD, HashParams())  # production cost at login
    new_bots = max(0, round(players * bots_per_player) - world.bots)
    radius = settings.map_radius
    summary = await generate_world(
        engine, players=players - have, template=template, stocks=stocks,
        shards=settings.tick_shards, map_radius=radius, password_hash=password_hash,
        name_prefix="player", seed=seed + have,
    )  # fmt: skip
    if new_bots:
        await generate_world(
            engine, players=new_bots, template=template, stocks=stocks,
            shards=settings.tick_shards, map_radius=radius, seed=seed + 7 + world.bots,
        )  # fmt: skip
        world.bots += new_bots
    first, last = summary.first_village_id, summary.last_village_id
    rich_every = max(1, round(1 / rich_share)) if rich_share > 0 else 0
    async with engine.begin() as conn:
        rows = (
            await conn.execute(
                select(Village.id, Village.player_id, Village.x, Village.y, Player.name)
                .join(Player, Player.id == Village.player_id)
                .where(Village.id.between(first, last))
                .order_by(Village.id)
            )
        ).all()
        ids = [r.player_id for r in rows]
        # people, not bots: whatever treats bots apart treats these as players (by the
        # villages' range: a list of ids is bound to a statement's 32,767 parameters)
        await conn.execute(
            update(Player)
            .where(Player.id.in_(select(Village.player_id).where(Village.id.between(first, last))))
            .values(is_bot=False)
        )
        if rich_every:
            sets = [f"{res} = {PLENTY}" for res in stocks.names]
            sets += [f"{cap}_cap = {PLENTY}" for cap in stocks.caps]
            await conn.execute(
                text(
                    f"UPDATE {stocks.table.name} SET {', '.join(sets)} "
                    f"WHERE village_id BETWEEN :a AND :b AND (village_id - :a) % :k = 0"
                ),
                {"a": first, "b": last, "k": rich_every},
            )
        spots = {
            (x, y)
            for x, y in await conn.execute(
                select(Village.x, Village.y)
                .join(Player, Player.id == Village.player_id)
                .where(Player.is_bot.is_(True))
            )
        }
    tokens = await mint_sessions(world, ids)
    for r, token in zip(rows, tokens, strict=True):
        tx, ty = nearest(spots, r.x, r.y)
        world.players.append(SimPlayer(r.player_id, str(r.name), token, r.id, tx, ty))


def nearest(spots: set[tuple[int, int]], x: int, y: int) -> tuple[int, int]:
    """The closest spot of ``spots`` to (x, y), searched ring by ring."""
    for reach in range(1, 200):
        ring = [(x + dx, y + dy) for dx in range(-reach, reach + 1) for dy in (-reach, reach)] + [
            (x + dx, y + dy) for dx in (-reach, reach) for dy in range(-reach + 1, reach)
        ]
        found = [p for p in ring if p in spots]
        if found:
            return min(found)
    return min(spots) if spots else (x + 1, y)


async def mint_sessions(world: World, player_ids: list[int]) -> list[str]:
    """One session per player, through ``SessionStore.create`` (the login's own call)."""
    from redis.asyncio import Redis

    settings = world.db.settings
    redis = Redis.from_url(world.redis_url)
    fast = FastRedis(world.redis_url)
    store = SessionStore(
        world.db.engine, redis, fast, settings.redis_prefix, SYSTEM_CLOCK,
        ttl_ms=settings.session_ttl_s * 1000, negative_ttl_ms=5_000,
    )  # fmt: skip
    gate = asyncio.Semaphore(SESSIONS_AT_ONCE)

    async def one(player_id: int) -> str:
        async with gate:
            return (await store.create(player_id)).token

    try:
        return list(await asyncio.gather(*(one(p) for p in player_ids)))
    finally:
        await redis.aclose()
        with contextlib.suppress(Exception):
            await fast.close()


def free_port() -> int:
    from common.embedded_redis import free_port as pick

    return pick()


class Processes:
    """The tiers' processes: ``webfront --workers K`` and M ``gameserver``."""

    def __init__(self, env: dict[str, str], web_workers: int, task_servers: int) -> None:
        self.bin = Path(sys.executable).parent
        # the web tier's /metrics answers this token: the bench's trusted proxy (its logins'
        # X-Forwarded-For) makes its own requests look forwarded, not local
        self.metrics_token = secrets.token_urlsafe(16)
        self.env = {
            **os.environ,
            **env,
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "WEB_METRICS_TOKEN": self.metrics_token,
        }
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.web_workers = web_workers
        self.metrics_ports = [free_port() for _ in range(task_servers)]
        self.web: subprocess.Popen[bytes] | None = None
        self.tasks: list[subprocess.Popen[bytes]] = []
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - open while they run

    def start(self) -> None:
        web = [str(self.bin / "webfront"), "--host", "127.0.0.1", "--port", str(self.port)]
        if self.web_workers > 1:
            web += ["--workers", str(self.web_workers)]
        self.web = subprocess.Popen(web, env=self.env, stdout=self._log, stderr=self._log)
        for port in self.metrics_ports:
            env = {**self.env, "GAMESERVER_METRICS_PORT": str(port)}
            self.tasks.append(
                subprocess.Popen(
                    [str(self.bin / "gameserver")], env=env, stdout=self._log, stderr=self._log
                )
            )

    def output(self) -> str:
        self._log.seek(0)
        return " | ".join(self._log.read().decode(errors="replace").strip().splitlines()[-6:])

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.all()):
                raise FatalError(f"a bench world process exited: {self.output()}")
            web_up = await asyncio.to_thread(_answers, f"{self.url}/api/time")
            tasks_up = all([await asyncio.to_thread(_answers, m) for m in self.metrics_urls()])
            if web_up and tasks_up and len(self.web_pids()) >= self.web_workers:
                return
            await asyncio.sleep(0.2)
        raise FatalError(f"the bench world did not start in {timeout_s:.0f} s: {self.output()}")

    def all(self) -> list[subprocess.Popen[bytes]]:
        return ([self.web] if self.web else []) + self.tasks

    def metrics_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}/metrics" for p in self.metrics_ports]

    def streams_dropped(self) -> float | None:
        """Event streams the web tier dropped for falling behind, since it started
        (``webfront_push_dropped``); None with several web workers, whose registries are
        their own (a scrape reaches whichever worker the kernel picks), or when an
        overloaded web tier does not answer in time (its figure is missing, not the step)."""
        if self.web_workers > 1:
            return None
        auth = {"Authorization": f"Bearer {self.metrics_token}"}
        try:
            scraped = scrape_histograms([f"{self.url}/metrics"], (PUSH_DROPPED,), auth)
        except OSError:  # refused, reset or timed out
            return None
        counter = scraped[PUSH_DROPPED]
        return counter[-1][1] if counter else 0.0

    def web_pids(self) -> list[int]:
        """The serving web processes (the supervisor of ``--workers`` only waits)."""
        if self.web is None:
            return []
        if self.web_workers == 1:
            return [self.web.pid]
        pids = []
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.web.pid).children():
                with contextlib.suppress(psutil.Error):
                    # the workers, not multiprocessing's resource tracker beside them
                    if any("spawn_main" in part for part in child.cmdline()):
                        pids.append(child.pid)
        return pids

    def task_pids(self) -> list[int]:
        return [p.pid for p in self.tasks]

    def stop(self) -> None:
        for proc in self.all():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.all():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._log.close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


PUSH_DROPPED = "webfront_push_dropped"


def scrape_histograms(
    urls: list[str], names: tuple[str, ...], headers: dict[str, str] | None = None
) -> dict[str, list[list[float]]]:
    """Each histogram's cumulative ``[le, count]`` buckets, summed over the servers at
    ``urls`` (a counter's total, over all its labels, as one ``[inf, total]`` bucket)."""
    sums: dict[str, dict[float, float]] = {name: {} for name in names}
    for url in urls:
        request = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read().decode()
        for family in text_string_to_metric_families(body):
            if family.name not in sums:
                continue
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    le = float(sample.labels["le"])
                elif family.type == "counter" and sample.name.endswith("_total"):
                    le = math.inf
                else:
                    continue
                sums[family.name][le] = sums[family.name].get(le, 0.0) + sample.value
    return {name: [[le, n] for le, n in sorted(b.items())] for name, b in sums.items()}


def histogram_delta(before: list[list[float]], after: list[list[float]]) -> list[list[float]]:
    start = {le: n for le, n in before}
    return [[le, n - start.get(le, 0.0)] for le, n in after]


def process_cpu_ns(pid: int) -> int:
    """Nanoseconds the threads of ``pid`` have run (``/proc/PID/task/*/schedstat``: exact,
    where the clock ticks of ``/proc/PID/stat`` would round a quiet process's few ms away);
    0 for a process that is gone."""
    total = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    return total


class CpuClock:
    """CPU seconds of each tier's processes (``process_cpu_ns``)."""

    def __init__(self, tiers: dict[str, Any]) -> None:
        self.tiers = tiers  # name -> a callable returning the tier's pids now

    def read(self) -> dict[str, dict[int, float]]:
        out: dict[str, dict[int, float]] = {}
        for name, pids_of in self.tiers.items():
            seconds: dict[int, float] = {}
            for pid in pids_of():
                seconds[pid] = process_cpu_ns(pid) / 1e9
            out[name] = seconds
        return out

    @staticmethod
    def used(
        before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
    ) -> dict[str, tuple[float, int]]:
        """CPU seconds per tier between two reads, and how many processes it had."""
        result = {}
        for name, now in after.items():
            start = before.get(name, {})
            used = sum(t - start.get(pid, 0.0) for pid, t in now.items())
            result[name] = (max(0.0, used), max(len(now), 1))
        return result


def postgres_pids(database: str) -> Any:
    return lambda: backend_pids(database)


def embedded_redis() -> EmbeddedRedis:
    return EmbeddedRedis().start()
