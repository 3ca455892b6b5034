"""``python -m bench push``: one web process holding N open event streams (``GET /api/events``)
while random players' snapshot versions are bumped; per change, the time from the bump to
the client reading its ``version`` event.

The web process is the real app (``webfront.app.create_app``) in its own process. Sessions
are written to Redis as the login would cache them (the stream authenticates from that
cache; no database read is measured). The clients are one lean asyncio protocol per
connection in this process (no HTTP client library: 10,000 of them must fit on one core
beside the server), and the bumps are ``common.snapshot_versions.bump_versions``, as a
command or a task-server batch calls it: the latency covers the script, the PUBLISH, the
web process's one subscription, its fan-out and the socket.

Phases: ``steady`` (single-player bumps at ``--rate`` per second, as commands commit) and
``bursts`` (``--burst`` players in one bump, as a batch of march arrivals). The web process's
RSS (before and with the streams open) and CPU (over the steady phase) are read from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from redis.asyncio import Redis

from common.snapshot_versions import bump_versions
from webfront import keys
from webfront.sessions import token_hash

_VERSION = re.compile(rb'event: version\ndata: \{"version":(\d+)\}')
_CONNECT_AT_ONCE = 256  # connections being opened at a time (the server's backlog is 128)
_FD_SPARE = 512  # descriptors besides the streams (Redis, files, the server's own)


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit (children inherit it); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@dataclass
class Latencies:
    pending: dict[int, float] = field(default_factory=dict)  # player -> bumped at
    seconds: list[float] = field(default_factory=list)
    late: int = 0  # events of players with nothing pending (a resync, a double)
    drained: asyncio.Event = field(default_factory=asyncio.Event)  # nothing pending

    def sent(self, player: int, at: float) -> None:
        self.pending[player] = at
        self.drained.clear()

    def received(self, player: int, at: float) -> None:
        sent = self.pending.pop(player, None)
        if sent is None:
            self.late += 1
        else:
            self.seconds.append(at - sent)
            if not self.pending:
                self.drained.set()


class StreamClient(asyncio.Protocol):
    """One player's stream: sends the request, then reads version events."""

    def __init__(self, player: int, token: str, host: str, latencies: Latencies) -> None:
        self.player = player
        self.request = (
            f"GET /api/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        ).encode()
        self.latencies = latencies
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.buffer = b""
        self.headers_done = False
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.request)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        at = time.perf_counter()
        buffer = self.buffer + data
        if not self.headers_done:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            status = buffer[: buffer.find(b"\r\n")]
            if b" 200 " not in status:
                if not self.ready.done():
                    self.ready.set_exception(RuntimeError(status.decode(errors="replace")))
                return
            self.headers_done = True
            if not self.ready.done():
                self.ready.set_result(None)
            buffer = buffer[end + 4 :]
        # each write of the server is one whole event (one HTTP chunk): read up to the last
        cut = buffer.rfind(b"\n\n")
        if cut < 0:
            self.buffer = buffer
            return
        for _ in _VERSION.finditer(buffer, 0, cut + 2):
            self.latencies.received(self.player, at)
        self.buffer = buffer[cut + 2 :]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("closed before the stream started"))


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def summarize(seconds: list[float]) -> dict[str, float | int]:
    values = sorted(seconds)
    return {
        "count": len(values),
        "p50_ms": round(_percentile(values, 0.50) * 1000, 2),
        "p90_ms": round(_percentile(values, 0.90) * 1000, 2),
        "p99_ms": round(_percentile(values, 0.99) * 1000, 2),
        "max_ms": round(values[-1] * 1000, 2) if values else float("nan"),
    }


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(port: int) -> None:
    """The web process: the real app, tuned as ``webfront`` runs it (``python -m bench.push``)."""
    from bench.web.servers import _serve
    from common.entrypoint import run_async, setup_logging
    from common.settings import load_settings
    from webfront.app import create_app
    from webfront.main import tune_process

    settings = load_settings()
    setup_logging(settings.log_level)

    async def go() -> None:
        await _serve(create_app(settings), port, tune_process)

    sys.exit(run_async(go))


class WebProcess:
    def __init__(self, port: int, env: dict[str, str], log: Path) -> None:
        self.port = port
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.push", str(port)],
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.ps = psutil.Process(self.proc.pid)

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the web process exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            await asyncio.sleep(0.1)
        raise RuntimeError("the web process did not start listening")

    def rss_mb(self) -> float:
        return float(self.ps.memory_info().rss) / 2**20

    def cpu_s(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def _sessions(redis: Redis, prefix: str, players: int) -> dict[int, str]:
    """A cached session per player, as a login leaves it in Redis."""
    expires = int(time.time() * 1000) + 3_600_000
    tokens = {player: secrets.token_urlsafe(32) for player in range(1, players + 1)}
    pipe = redis.pipeline(transaction=False)
    for player, token in tokens.items():
        pipe.set(keys.session(prefix, token_hash(token)), f"{player}:{expires}", px=3_600_000)
    await pipe.execute()
    return tokens


async def _open(
    tokens: dict[int, str], port: int, latencies: Latencies
) -> list[tuple[asyncio.Transport, StreamClient]]:
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(_CONNECT_AT_ONCE)
    host = f"127.0.0.1:{port}"

    async def one(player: int, token: str) -> tuple[asyncio.Transport, StreamClient]:
        async with gate:
            transport, client = await loop.create_connection(
                lambda: StreamClient(player, token, host, latencies), "127.0.0.1", port
            )
            await asyncio.wait_for(client.ready, 60)
            return transport, client

    return await asyncio.gather(*(one(p, t) for p, t in tokens.items()))


async def _wait_drained(latencies: Latencies, timeout_s: float) -> None:
    """Until every pending change was received, or ``timeout_s`` (they count as lost)."""
    if latencies.pending:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(latencies.drained.wait(), timeout_s)


async def _steady(
    redis: Redis, prefix: str, players: int, rate: float, seconds: float, latencies: Latencies
) -> int:
    """Single-player bumps at ``rate`` per second; returns the bumps made."""
    rng = random.Random(1)
    interval = 1.0 / rate
    start = time.perf_counter()
    made = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + made * interval
        if now < due:
            await asyncio.sleep(due - now)
        player = rng.randint(1, players)
        if player in latencies.pending:
            continue  # one change in flight per player: a receipt names its bump
        latencies.sent(player, time.perf_counter())
        await bump_versions(redis, prefix, [player], int(time.time() * 1000))
        made += 1
    return made


async def _bursts(
    redis: Redis, prefix: str, players: int, size: int, count: int, latencies: Latencies
) -> None:
    rng = random.Random(2)
    for _ in range(count):
        await _wait_drained(latencies, 10)
        chosen = rng.sample(range(1, players + 1), min(size, players))
        at = time.perf_counter()
        for player in chosen:
            latencies.sent(player, at)
        await bump_versions(redis, prefix, chosen, int(time.time() * 1000))
        await _wait_drained(latencies, 10)


async def push_bench(
    channels: int, rate: float, seconds: float, burst: int, bursts: int, redis_url: str
) -> dict[str, Any]:
    limit = raise_fd_limit(channels + _FD_SPARE)
    if limit < channels + _FD_SPARE:
        raise RuntimeError(
            f"the open-file limit is {limit}; {channels:,} streams need {channels + _FD_SPARE:,} "
            "(raise the hard limit: ulimit -Hn)"
        )
    prefix = f"wgbench_push_{uuid.uuid4().hex[:8]}"
    port = _free_port()
    redis = Redis.from_url(redis_url)
    folder = Path(tempfile.mkdtemp(prefix="bench-push-"))
    env = {
        "REDIS_URL": redis_url,
        "REDIS_PREFIX": prefix,
        "DATABASE_URL": f"sqlite+aiosqlite:///{folder / 'unused.db'}",  # streams read no rows
        "PUSH_MAX_CHANNELS": str(channels + 100),
        "LOG_LEVEL": "WARNING",
    }
    web = WebProcess(port, env, folder / "web.log")
    transports: list[tuple[asyncio.Transport, StreamClient]] = []
    try:
        await web.wait_ready()
        tokens = await _sessions(redis, prefix, channels)
        rss_idle = web.rss_mb()
        latencies = Latencies()
        opened_at = time.perf_counter()
        transports = await _open(tokens, port, latencies)
        open_s = time.perf_counter() - opened_at
        rss_open = web.rss_mb()
        # a first change for everyone reached: the subscription is up
        await _bursts(redis, prefix, channels, channels, 1, latencies)
        latencies.seconds.clear()

        cpu_before, wall_before = web.cpu_s(), time.perf_counter()
        made = await _steady(redis, prefix, channels, rate, seconds, latencies)
        await _wait_drained(latencies, 10)
        steady_wall = time.perf_counter() - wall_before
        steady_cpu = web.cpu_s() - cpu_before
        steady = summarize(latencies.seconds)
        lost_steady = len(latencies.pending)
        latencies.pending.clear()
        latencies.seconds.clear()

        await _bursts(redis, prefix, channels, burst, bursts, latencies)
        burst_summary = summarize(latencies.seconds)
        lost_bursts = len(latencies.pending)
        closed = sum(1 for _, client in transports if client.closed)
        rss_end = web.rss_mb()
        met = bool(
            steady["p99_ms"] < 1000
            and (not bursts or burst_summary["p99_ms"] < 1000)
            and not lost_steady
            and not lost_bursts
        )
    finally:
        for transport, _ in transports:
            transport.abort()
        web.stop()
        await _delete_prefix(redis, prefix)
        await redis.aclose()
    return {
        "channels": channels,
        "open_seconds": round(open_s, 2),
        "streams_closed_by_server": closed,
        "steady": {
            "rate_per_s": rate,
            "seconds": seconds,
            "changes": made,
            "lost": lost_steady,
            **steady,
            "web_cpu_share_of_one_core": round(steady_cpu / steady_wall, 3),
            "web_cpu_us_per_change": round(steady_cpu / max(made, 1) * 1e6, 1),
        },
        "bursts": {
            "players_per_bump": burst,
            "bumps": bursts,
            "lost": lost_bursts,
            **burst_summary,
        },
        "web_rss_mb": {
            "idle": round(rss_idle, 1),
            "streams_open": round(rss_open, 1),
            "end": round(rss_end, 1),
            "kb_per_stream": round((rss_open - rss_idle) * 1024 / channels, 2),
        },
        "target": {"p99_ms_below": 1000, "met": met},
    }


async def _delete_prefix(redis: Redis, prefix: str) -> None:
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await redis.unlink(*batch)
            batch.clear()
    if batch:
        await redis.unlink(*batch)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
