"""Servers run by the bench: the real web front, a bare aiohttp hello and the bare command
ceiling (``bench.web.bare_commands``), N processes each."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from common.errors import FatalError


class Servers:
    """N processes of ``python -m bench.web <kind>`` sharing one port (SO_REUSEPORT)."""

    def __init__(self, kind: str, workers: int, env: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.workers = workers
        self.env = {**os.environ, **(env or {})}
        self.port = free_port()
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
        path = "/api/time" if self.kind.startswith("serve") else "/hello"
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

    async def snapshot_builds(self) -> int:
        """The web front's count of snapshot builds (``webfront_snapshot_builds_total``); of
        one process only: with several, a request reaches whichever the kernel picks."""
        async with (
            aiohttp.ClientSession() as http,
            http.get(self.url + "/metrics") as response,
        ):
            text = await response.text()
        for line in text.splitlines():
            if line.startswith("webfront_snapshot_builds_total "):
                return int(float(line.split()[1]))
        raise FatalError(f"the bench {self.kind} server's /metrics has no snapshot builds")

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench_web_config() -> Any:
    """Production web config, but limits that a load test must not trip and a cheap hash.

    Rate limits are still checked (the Lua call runs on every command); they
    just never refuse. The password hash only costs time at registration, which is not
    measured.
    """
    from webfront.config import Limit, WebConfig
    from webfront.passwords import HashParams

    unlimited = Limit(10**12, 60_000)
    return WebConfig(
        password_hash=HashParams(memory_kib=256, time_cost=1),
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


async def serve_game(port: int, cached: bool = True) -> None:
    """The web front; ``cached=False``: with both snapshot body caches off, so every full
    snapshot is built (the "build" phase)."""
    from dataclasses import replace

    from common.entrypoint import setup_logging
    from common.settings import load_settings
    from webfront.app import create_app
    from webfront.main import tune_process

    settings = load_settings()
    setup_logging(settings.log_level)
    config = bench_web_config()
    if not cached:
        config = replace(config, snapshot_cache_ttl_ms=0, local_cache_bodies=0)
    await _serve(create_app(settings, config=config), port, tune_process)
