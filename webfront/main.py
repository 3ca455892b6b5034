"""``webfront``: run the web server, as one process or as ``--workers N`` sharing a port.

Several processes: ``--workers N`` starts N worker processes that each bind the
same port with ``SO_REUSEPORT``, so the kernel spreads connections over them
(Linux). The parent checks Redis and the database once, then only supervises:
it forwards SIGINT/SIGTERM, and if a worker dies on its own it stops the rest
and exits with that worker's code. Separately started ``webfront --reuse-port``
processes share a port the same way. Each worker has its own /metrics.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import multiprocessing
import signal
import sys
from multiprocessing.connection import wait
from types import FrameType

import click
from aiohttp import web

from common.entrypoint import run_async, setup_logging
from common.errors import FatalError
from common.redis_conn import check_redis, create_redis
from common.settings import Settings, load_settings
from db.engine import check_database, create_engine
from db.migrate import require_current
from gameapi.loading import load_game
from webfront.app import create_app

log = logging.getLogger("webfront")
GC_GEN0_THRESHOLD = 10_000  # fewer gen-0 passes on the poll path; far higher, each pause grows
# connections the kernel holds for us until accepted (capped by net.core.somaxconn):
# aiohttp's 128 overflows when a busy process meets a burst of connects (a world's clients
# reconnecting after a restart), and the overflow reaches clients as resets
LISTEN_BACKLOG = 4096

_STOP_GRACE_S = 10.0


async def preflight(settings: Settings) -> None:
    """Fail fast, with one clear line, on a game that does not load, an unreachable server
    or an unmigrated database."""
    load_game(settings.game)
    redis = create_redis(settings)
    try:
        await check_redis(redis, settings.redis_url)
    finally:
        await redis.aclose()
    engine = create_engine(settings)
    try:
        await check_database(engine)
        await require_current(engine, settings)
    finally:
        await engine.dispose()


async def serve(
    settings: Settings, host: str, port: int, reuse_port: bool, check_first: bool = True
) -> None:
    if check_first:
        await preflight(settings)
    runner = web.AppRunner(create_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG, reuse_port=reuse_port or None)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        if exc.errno == errno.EADDRINUSE:
            raise FatalError(f"WEB_PORT: {host}:{port} is already in use") from None
        raise FatalError(f"WEB_HOST/WEB_PORT: cannot listen on {host}:{port}: {exc}") from None
    log.info("web server listening on http://%s:%d", host, port)
    tune_process()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()


def tune_process() -> None:
    """Runtime settings of a serving web process (once started; the bench's server too)."""
    # What start-up loaded lives on: keep it out of full collections, and collect the
    # young generation less often, so a request rarely waits behind a GC pause.
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])


def _worker(host: str, port: int) -> None:
    """One worker process (spawned: a fresh interpreter, no inherited event loop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent relays a Ctrl-C as SIGTERM

    async def run() -> None:
        settings = load_settings()
        setup_logging(settings.log_level)
        await serve(settings, host, port, reuse_port=True, check_first=False)

    sys.exit(run_async(run, server=True))


def run_workers(host: str, port: int, workers: int) -> int:
    """Start ``workers`` processes on one port and supervise them; return the exit code."""
    spawn = multiprocessing.get_context("spawn")
    procs = [
        spawn.Process(target=_worker, args=(host, port), name=f"webfront-worker-{i}")
        for i in range(workers)
    ]
    stopping = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for proc in procs:
            if proc.is_alive():
                proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for proc in procs:
        proc.start()
    log.info("started %d workers on %s:%d", workers, host, port)
    code = 0
    running = list(procs)
    while running:
        wait([p.sentinel for p in running])
        for proc in [p for p in running if not p.is_alive()]:
            running.remove(proc)
            if not stopping:  # a worker died on its own: stop the others
                code = proc.exitcode if proc.exitcode and proc.exitcode > 0 else 1
                stop(signal.SIGTERM, None)
    for proc in procs:
        proc.join(_STOP_GRACE_S)
        if proc.is_alive():
            proc.kill()
    return code


@click.command()
@click.option("--host", default=None, help="bind address (default: WEB_HOST)")
@click.option("--port", type=int, default=None, help="port (default: WEB_PORT)")
@click.option("--reuse-port", is_flag=True, help="SO_REUSEPORT: several processes share a port")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="worker processes sharing the port (SO_REUSEPORT)",
)
@click.option("--check", is_flag=True, help="check Redis and the database, then exit")
def cli(host: str | None, port: int | None, reuse_port: bool, workers: int, check: bool) -> int:
    """Run a web server process of the game."""
    settings_holder: list[Settings] = []

    async def checked() -> None:
        settings = load_settings()
        setup_logging(settings.log_level)
        await preflight(settings)
        settings_holder.append(settings)

    if check:
        run_async(checked)
        click.echo("ok: Redis and the database are reachable and migrated")
        return 0
    if workers > 1:
        run_async(checked)
        settings = settings_holder[0]
        sys.exit(run_workers(host or settings.web_host, port or settings.web_port, workers))

    async def run() -> None:
        settings = load_settings()
        setup_logging(settings.log_level)
        await serve(settings, host or settings.web_host, port or settings.web_port, reuse_port)

    return run_async(run, server=True)


def main() -> None:
    cli()
