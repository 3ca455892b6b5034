"""Snapshot polling and commands over HTTP, beside a bare aiohttp endpoint (the ceiling).

Everything runs in separate processes so the load generator does not share an
event loop with a server: the web server (``python -m bench.web serve``, the
real ``webfront.app.create_app`` with bench limits), the ceiling
(``python -m bench.web hello``, a bare aiohttp handler) and the load
generator (``wrk`` with a generated Lua script, or ``python -m bench.web
load``, an aiohttp client, when wrk is not installed).

``--workers N`` starts N processes of each server sharing the port with
``SO_REUSEPORT``, as ``webfront --workers N`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from common.errors import FatalError, UnreachableError

PHASES = ("bare", "poll_304", "full", "commands")
PHASE_SHORT = {"bare": "bare hello", "poll_304": "304 poll", "full": "full", "commands": "commands"}
PHASE_TITLES = {
    "bare": "bare aiohttp hello (ceiling)",
    "poll_304": "snapshot poll, If-None-Match -> 304",
    "full": "full snapshot (no If-None-Match)",
    "commands": "command mix (build / train)",
}
TARGETS = {"poll_304_ratio": 0.7, "full_ratio": 0.4, "p99_ms": 50.0}
PASSWORD = "bench-password-1"
_RESULT_MARK = "WRKJSON "


# ---- what a load run sends and what it measured


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    headers: dict[str, str]
    body: str | None = None


@dataclass
class LoadResult:
    phase: str
    connections: int
    duration_s: float
    requests: int
    rps: float
    latency_ms: dict[str, float]
    statuses: dict[str, int]
    errors: dict[str, int]
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds by role in the run

    @property
    def ok_share(self) -> float:
        ok = sum(n for s, n in self.statuses.items() if s.startswith(("2", "3")))
        return ok / max(1, self.requests)

    def cpu_us_per_request(self, role: str) -> float:
        return self.cpu_s.get(role, 0.0) * 1e6 / max(1, self.requests)


@dataclass
class Player:
    token: str
    village_id: int
    etag: str | None = None
    player_id: int = 0


# ---- load generators


def _lua_str(text: str) -> str:
    level = 1
    while f"]{'=' * level}]" in text:
        level += 1
    eq = "=" * level
    return f"[{eq}[{text}]{eq}]"


_LUA_BODY = """
local threads = {}
function setup(thread)
  thread:set("offset", #threads * 7919)
  table.insert(threads, thread)
end
local formatted = {}
local counter = 0
function init(args)
  statuses = {}
  for i, r in ipairs(reqs) do formatted[i] = wrk.format(r[1], r[2], r[3], r[4]) end
  counter = offset or 0
end
function request()
  counter = counter + 1
  return formatted[(counter % #formatted) + 1]
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do total[k] = (total[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(total) do parts[#parts + 1] = string.format('"%d": %d', k, v) end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"duration_us": %d, "requests": %d, "errors": {"connect": %d, "read": %d, ' ..
    '"write": %d, "timeout": %d}, "latency_us": {"p50": %d, "p90": %d, "p99": %d, ' ..
    '"max": %d, "mean": %f}, "statuses": {%s}}\\n',
    summary.duration, summary.requests, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, table.concat(parts, ", ")))
end
"""


def wrk_script(requests: Sequence[Req]) -> str:
    lines = ["reqs = {"]
    for r in requests:
        headers = ", ".join(f"[ {_lua_str(k)} ] = {_lua_str(v)}" for k, v in r.headers.items())
        body = _lua_str(r.body) if r.body is not None else "nil"
        lines.append(f"  {{{_lua_str(r.method)}, {_lua_str(r.path)}, {{{headers}}}, {body}}},")
    lines.append("}")
    return "\n".join(lines) + _LUA_BODY


def _parse_result(phase: str, connections: int, stdout: str, stderr: str) -> LoadResult:
    for line in stdout.splitlines():
        if line.startswith(_RESULT_MARK):
            raw = json.loads(line[len(_RESULT_MARK) :])
            break
    else:
        raise FatalError(f"the load generator printed no result: {(stderr or stdout).strip()}")
    duration = raw["duration_us"] / 1e6
    lat = raw["latency_us"]
    return LoadResult(
        phase=phase,
        connections=connections,
        duration_s=duration,
        requests=int(raw["requests"]),
        rps=raw["requests"] / max(duration, 1e-9),
        latency_ms={k: float(lat[k]) / 1000 for k in ("p50", "p90", "p99", "max", "mean")},
        statuses={str(k): int(v) for k, v in raw["statuses"].items()},
        errors={k: int(v) for k, v in raw["errors"].items()},
    )


@dataclass
class LoadGenerator:
    client: str  # "wrk" or "python"
    threads: int = 1

    @staticmethod
    def pick(client: str, threads: int) -> LoadGenerator:
        if client == "auto":
            client = "wrk" if shutil.which("wrk") else "python"
        if client == "wrk" and not shutil.which("wrk"):
            raise FatalError("--client wrk: wrk is not installed (apt-get install wrk)")
        return LoadGenerator(client, threads)

    def version(self) -> str:
        if self.client == "python":
            return f"aiohttp {aiohttp.__version__} client"
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
        found = re.search(r"(\d+\.\d+[.\d]*)", out)
        return f"wrk {found.group(1)}" if found else "wrk"

    async def run(
        self,
        phase: str,
        base_url: str,
        requests: Sequence[Req],
        connections: int,
        duration_s: float,
        watch: CpuWatch | None = None,
    ) -> LoadResult:
        with tempfile.TemporaryDirectory(prefix="wgbench-load-") as tmp:
            if self.client == "wrk":
                script = Path(tmp) / "load.lua"
                script.write_text(wrk_script(requests))
                threads = max(1, min(self.threads, connections))
                args = [
                    "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration_s))}s",
                    "--timeout", "10s", "-s", str(script), base_url,
                ]  # fmt: skip
            else:
                spec = Path(tmp) / "load.json"
                spec.write_text(
                    json.dumps(
                        {
                            "url": base_url,
                            "requests": [asdict(r) for r in requests],
                            "connections": connections,
                            "duration_s": duration_s,
                        }
                    )
                )
                args = [sys.executable, "-m", "bench.web", "load", str(spec)]
            before = watch.sample() if watch else None
            proc = await asyncio.create_subprocess_exec(
                *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            out, err = await proc.communicate()
            result = _parse_result(phase, connections, out.decode(), err.decode())
            if watch and before is not None:
                result.cpu_s = watch.since(before)
            return result


# ---- the python load generator (``python -m bench.web load spec.json``)


async def python_load(spec: dict[str, Any]) -> dict[str, Any]:
    from bench.report import percentiles

    requests = [Req(**r) for r in spec["requests"]]
    connections = int(spec["connections"])
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    counter = random.randrange(len(requests))
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(spec["url"], connector=connector, timeout=timeout) as http:
        started = time.perf_counter()
        deadline = started + float(spec["duration_s"])

        async def loop() -> None:
            nonlocal counter
            while time.perf_counter() < deadline:
                counter += 1
                r = requests[counter % len(requests)]
                t0 = time.perf_counter()
                try:
                    async with http.request(
                        r.method, r.path, headers=r.headers, data=r.body
                    ) as response:
                        await response.read()
                    latencies.append(time.perf_counter() - t0)
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                except TimeoutError:
                    errors["timeout"] += 1
                except aiohttp.ClientConnectorError:
                    errors["connect"] += 1
                    await asyncio.sleep(0.01)
                except aiohttp.ClientError:
                    errors["read"] += 1

        await asyncio.gather(*(loop() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    lat = percentiles(latencies)
    mean = sum(latencies) / max(1, len(latencies))
    return {
        "duration_us": int(elapsed * 1e6),
        "requests": len(latencies),
        "errors": errors,
        "latency_us": {**{k: v * 1e6 for k, v in lat.items()}, "mean": mean * 1e6},
        "statuses": {str(k): v for k, v in statuses.items()},
    }


# ---- CPU accounting: which process burned the 2 cores during a run


class CpuWatch:
    """CPU seconds of the server processes, Redis (INFO) and the load generator (children)."""

    def __init__(self, server_pids: Sequence[int], redis_url: str | None) -> None:
        self.server_pids = list(server_pids)
        self.redis_url = redis_url

    def _server(self) -> float:
        total = 0.0
        for pid in self.server_pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def _redis(self) -> float:
        if not self.redis_url:
            return 0.0
        from redis import Redis as SyncRedis

        try:
            client = SyncRedis.from_url(self.redis_url, socket_timeout=2)
            info = client.info("cpu")
            client.close()
        except Exception:
            return 0.0
        return float(info.get("used_cpu_sys", 0)) + float(info.get("used_cpu_user", 0))

    def sample(self) -> dict[str, float]:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "server": self._server(),
            "redis": self._redis(),
            "load_generator": children.ru_utime + children.ru_stime,
            "wall": time.perf_counter(),
        }

    def since(self, before: dict[str, float]) -> dict[str, float]:
        now = self.sample()
        return {k: round(now[k] - before[k], 3) for k in now}


# ---- servers run by the bench


class Servers:
    """N processes of ``python -m bench.web <kind>`` sharing one port (SO_REUSEPORT)."""

    def __init__(self, kind: str, workers: int, env: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.workers = workers
        self.env = {**os.environ, **(env or {})}
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - open while the servers run

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def _spawn(self) -> None:
        for _ in range(self.workers):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bench.web", self.kind, "--port", str(self.port)],
                    env=self.env,
                    stdout=self._log,
                    stderr=self._log,
                )
            )

    async def start(self, timeout_s: float = 30.0) -> Servers:
        self._spawn()
        path = "/hello" if self.kind == "hello" else "/api/time"
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if any(p.poll() is not None for p in self.procs):
                    break
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with http.get(self.url + path) as response:
                        if response.status == 200:
                            await asyncio.sleep(0.3)  # let the other workers bind too
                            return self
                await asyncio.sleep(0.1)
        self.stop()
        self._log.seek(0)
        output = self._log.read().decode(errors="replace").strip().splitlines()[-5:]
        raise FatalError(f"the bench {self.kind} server did not start: {' | '.join(output)}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        self._log.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench_web_config() -> Any:
    """Production web config, but limits that a load test must not trip and a cheap hash.

    Rate limits are still checked (the Lua call runs on every command); they
    just never refuse. scrypt only costs time at registration, which is not
    measured.
    """
    from webfront.config import Limit, WebConfig
    from webfront.passwords import ScryptParams

    unlimited = Limit(10**12, 60_000)
    return WebConfig(
        scrypt=ScryptParams(n=2**10, r=8, p=1),
        login_per_account=unlimited,
        login_per_address=unlimited,
        register_per_address=unlimited,
        commands_per_player=unlimited,
    )


async def _serve(app: Any, port: int, tune: Callable[[], None] | None = None) -> None:
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, reuse_port=True)
    await site.start()
    if tune is not None:  # as `webfront` runs (GC settings)
        tune()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


async def serve_hello(port: int) -> None:
    from aiohttp import web

    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    from webfront.main import tune_process

    app = web.Application()
    app.router.add_get("/hello", hello)
    await _serve(app, port, tune_process)  # tuned as the game server: the same runtime


async def serve_game(port: int) -> None:
    from common.entrypoint import setup_logging
    from common.settings import load_settings
    from webfront.app import create_app
    from webfront.main import tune_process

    settings = load_settings()
    setup_logging(settings.log_level)
    await _serve(create_app(settings, config=bench_web_config()), port, tune_process)


# ---- players


async def check_reachable(url: str) -> None:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            http.get(url.rstrip("/") + "/api/time") as response,
        ):
            if response.status != 200:
                raise UnreachableError(
                    f"--url: {url}/api/time answered {response.status}; is it a game web server?"
                )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        reason = str(exc) or type(exc).__name__
        raise UnreachableError(f"--url: cannot reach {url}: {reason}") from None


async def register_players(url: str, count: int, progress: Any = None) -> list[Player]:
    """Register ``count`` players (8 at a time); stop early, with a warning, on 429."""
    tag = secrets.token_hex(3)
    players: list[Player] = []
    limited: list[str] = []
    sem = asyncio.Semaphore(8)

    async def one(http: aiohttp.ClientSession, i: int) -> None:
        if limited:
            return
        async with sem:
            body = {"name": f"bench{tag}{i}", "password": PASSWORD}
            async with http.post("/api/register", json=body) as response:
                data = await response.json(content_type=None)
                if response.status == 429:
                    limited.append(str(data.get("error", {}).get("message", "rate limited")))
                    return
                if response.status != 201:
                    raise FatalError(f"POST /api/register answered {response.status}: {data}")
                players.append(Player(data["token"], int(data["village_id"])))
                if progress is not None:
                    progress.update()

    async with aiohttp.ClientSession(url) as http:
        await asyncio.gather(*(one(http, i) for i in range(count)))
    if limited and not players:
        raise FatalError(
            f"the server refused registrations ({limited[0]}); pass --token-file with tokens "
            "of existing players"
        )
    if limited:
        from bench.report import console

        console.print(
            f"[yellow]registration was rate limited after {len(players)} players; "
            f"using those ({limited[0]})[/yellow]"
        )
    return players


async def refresh_players(url: str, players: list[Player]) -> list[Player]:
    """Each player's current ETag and first village id, from GET /api/snapshot."""
    sem = asyncio.Semaphore(16)

    async def one(http: aiohttp.ClientSession, player: Player) -> Player:
        async with (
            sem,
            http.get(
                "/api/snapshot", headers={"Authorization": f"Bearer {player.token}"}
            ) as response,
        ):
            if response.status == 401:
                raise FatalError("a token of --token-file is unknown or expired on that server")
            if response.status != 200:
                raise FatalError(f"GET /api/snapshot answered {response.status}")
            data = await response.json(content_type=None)
            villages = data.get("villages") or []
            village_id = int(villages[0]["id"]) if villages else player.village_id
            etag = response.headers.get("ETag")
            return Player(player.token, village_id, etag, int(data["player_id"]))

    async with aiohttp.ClientSession(url) as http:
        return list(await asyncio.gather(*(one(http, p) for p in players)))


def read_tokens(path: Path) -> list[Player]:
    tokens = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if not tokens:
        raise FatalError(f"--token-file {path}: no tokens in it (one per line)")
    bad = [t for t in tokens if not re.fullmatch(r"[A-Za-z0-9_-]{20,200}", t)]
    if bad:
        raise FatalError(f"--token-file {path}: {len(bad)} lines are not session tokens")
    return [Player(token, 0) for token in tokens]


def phase_requests(phase: str, players: Sequence[Player]) -> list[Req]:
    if phase == "bare":
        return [Req("GET", "/hello", {})]
    auth = [{"Authorization": f"Bearer {p.token}"} for p in players]
    if phase == "poll_304":
        return [
            Req("GET", "/api/snapshot", {**a, "If-None-Match": p.etag or '"0"'})
            for a, p in zip(auth, players, strict=True)
        ]
    if phase == "full":
        return [Req("GET", "/api/snapshot", a) for a in auth]
    json_headers = {"Content-Type": "application/json"}
    mix: list[Req] = []
    for a, p in zip(auth, players, strict=True):
        build = {"village_id": p.village_id, "kind": "woodcutter"}
        train = {"village_id": p.village_id, "unit": "legionnaire", "count": 1}
        mix.append(Req("POST", "/api/build", {**a, **json_headers}, json.dumps(build)))
        mix.append(Req("POST", "/api/train", {**a, **json_headers}, json.dumps(train)))
    return mix


# ---- the whole run


@dataclass
class Changes:
    """Snapshot changes during a full-snapshot run: each player's version bumped once."""

    redis: Any  # redis.asyncio.Redis of the bench server
    prefix: str

    async def spread(self, player_ids: Sequence[int], seconds: float) -> None:
        """Bump each player's version once, at uniformly random moments over ``seconds``."""
        from common.snapshot_versions import bump_versions

        started = time.monotonic()
        for at, player_id in sorted((random.uniform(0, seconds), p) for p in player_ids):
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            now_ms = int(time.time() * 1000)
            await bump_versions(self.redis, self.prefix, [player_id], now_ms)


@dataclass
class WebFigures:
    results: list[LoadResult]
    connections: int
    players: int
    workers: int
    client: str
    target: str

    def at(self, phase: str, connections: int | None = None) -> LoadResult | None:
        want = connections or self.connections
        for r in self.results:
            if r.phase == phase and r.connections == want:
                return r
        return None

    def summary(self) -> dict[str, Any]:
        bare = self.at("bare")
        ratios: dict[str, float | None] = {}
        for phase in ("poll_304", "full", "commands"):
            ours = self.at(phase)
            ratios[f"{phase}_ratio"] = (
                ours.rps / bare.rps if ours and bare and bare.rps > 0 else None
            )
        p99 = {p: r.latency_ms["p99"] for p in PHASES if (r := self.at(p))}
        met = {
            "poll_304_ratio": (ratios["poll_304_ratio"] or 0) >= TARGETS["poll_304_ratio"],
            "full_ratio": (ratios["full_ratio"] or 0) >= TARGETS["full_ratio"],
            "poll_304_p99": p99.get("poll_304", 1e9) < TARGETS["p99_ms"],
            "full_p99": p99.get("full", 1e9) < TARGETS["p99_ms"],
        }
        return {
            "connections": self.connections,
            "players": self.players,
            "workers": self.workers,
            "client": self.client,
            "target": self.target,
            "ratios": ratios,
            "targets": TARGETS,
            "targets_met": met,
            "results": [
                {
                    **asdict(r),
                    "ok_share": r.ok_share,
                    "server_cpu_us_per_request": r.cpu_us_per_request("server"),
                }
                for r in self.results
            ],
        }


async def run_phases(
    load: LoadGenerator,
    bare_url: str,
    game_url: str,
    players: list[Player],
    levels: Sequence[int],
    main_connections: int,
    duration_s: float,
    sweep_duration_s: float,
    watches: dict[str, CpuWatch],
    changes: Changes | None = None,
) -> list[LoadResult]:
    """Every phase at every level; the read phases of one level run back to back.

    The bare ceiling and the two snapshot phases of a level follow each other
    within seconds, so a neighbour's load on a shared machine hits them alike.
    Commands come last: they change snapshot versions (and so the ETags).
    During each measured full-snapshot run, ``changes`` (if given) bumps every
    player's snapshot version once at a random moment, as the events of a live
    game do: the run serves cached bodies and also rebuilds every body once.
    """

    def seconds_of(connections: int, phase: str) -> float:
        return duration_s if connections == main_connections else sweep_duration_s

    from tqdm import tqdm

    order = [(c, p) for c in levels for p in ("bare", "poll_304", "full")]
    order += [(c, "commands") for c in levels]
    total_s = sum(seconds_of(c, p) + 1 for c, p in order)
    results: list[LoadResult] = []
    warmed: set[str] = set()
    with tqdm(total=len(order), desc=f"web load (~{total_s:.0f} s)", unit="run") as progress:
        for connections, phase in order:
            if phase == "poll_304":
                players[:] = await refresh_players(game_url, players)
            requests = phase_requests(phase, players)
            url = bare_url if phase == "bare" else game_url
            if phase not in warmed:  # a short unmeasured run: caches and connections
                await load.run(phase, url, requests, connections, 1.0)
                warmed.add(phase)
            seconds = seconds_of(connections, phase)
            progress.set_postfix_str(f"{phase} c={connections}")
            watch = watches["bare" if phase == "bare" else "game"]
            changing = None
            if phase == "full" and changes is not None:
                changing = asyncio.create_task(
                    changes.spread([p.player_id for p in players], seconds)
                )
            try:
                results.append(await load.run(phase, url, requests, connections, seconds, watch))
            finally:
                if changing is not None:
                    changing.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await changing
            progress.update()
    return results


async def _redis_version(redis_url: str) -> str | None:
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url, socket_timeout=3)
    try:
        info = await client.info("server")
        return str(info.get("redis_version"))
    except Exception:
        return None
    finally:
        await client.aclose()


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
    from bench.queue import check_bench_prefix, clear_prefix, load_average, warn_if_busy

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
    game: Servers | None = None
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
        # only a bench server's Redis is ours to bump versions in
        changes = Changes(redis, prefix) if full_cycle and redis is not None else None
        watches = {
            "bare": CpuWatch(bare.pids, None),
            "game": CpuWatch(game.pids if game else [], redis_url if game else None),
        }
        results = await run_phases(
            load, bare.url, game_url, roster, levels, connections, duration_s,
            sweep_duration_s, watches, changes,
        )  # fmt: skip
    finally:
        if game is not None:
            game.stop()
        if bare is not None:
            bare.stop()
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
        "redis": await _redis_version(redis_url),
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
        bare = figures.at("bare", r.connections)
        ratio = r.rps / bare.rps if bare and bare.rps else 0.0
        lat = [f"{r.latency_ms[k]:.1f}" for k in ("p50", "p90", "p99", "max")]
        rows.append([PHASE_SHORT[r.phase], r.connections, f"{r.rps:,.0f}", *lat, f"{ratio:.2f}"])
        cpu = (
            f"; server CPU {r.cpu_us_per_request('server'):,.0f} µs/request"
            if r.cpu_s.get("server")
            else ""  # an external server: its processes are not ours to watch
        )
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


# ---- ``python -m bench.web hello|serve|load``: the processes the bench starts


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.web")
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("hello", "serve"):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("load")
    p.add_argument("spec", type=Path)
    args = parser.parse_args(argv)
    if args.what == "hello":
        asyncio.run(serve_hello(args.port))
    elif args.what == "serve":
        from common.entrypoint import run_async

        sys.exit(run_async(lambda: serve_game(args.port)))
    else:
        figures = asyncio.run(python_load(json.loads(args.spec.read_text())))
        print(_RESULT_MARK + json.dumps(figures), flush=True)


if __name__ == "__main__":
    _main()
