"""``webfront``: start one web server process."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal

import click
from aiohttp import web

from common.entrypoint import run_async, setup_logging
from common.errors import FatalError
from common.redis_conn import check_redis, create_redis
from common.settings import Settings, load_settings
from db.engine import check_database, create_engine
from db.migrate import require_current
from webfront.app import create_app

log = logging.getLogger("webfront")


async def preflight(settings: Settings) -> None:
    """Fail fast, with one clear line, on an unreachable server or an unmigrated database."""
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


async def serve(settings: Settings, host: str, port: int, reuse_port: bool) -> None:
    await preflight(settings)
    runner = web.AppRunner(create_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        if exc.errno == errno.EADDRINUSE:
            raise FatalError(f"WEB_PORT: {host}:{port} is already in use") from None
        raise FatalError(f"WEB_HOST/WEB_PORT: cannot listen on {host}:{port}: {exc}") from None
    log.info("web server listening on http://%s:%d", host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()


@click.command()
@click.option("--host", default=None, help="bind address (default: WEB_HOST)")
@click.option("--port", type=int, default=None, help="port (default: WEB_PORT)")
@click.option("--reuse-port", is_flag=True, help="SO_REUSEPORT: several processes share a port")
@click.option("--check", is_flag=True, help="check Redis and the database, then exit")
def cli(host: str | None, port: int | None, reuse_port: bool, check: bool) -> int:
    """Run a web server process of the game."""

    async def run() -> None:
        settings = load_settings()
        setup_logging(settings.log_level)
        if check:
            await preflight(settings)
            click.echo("ok: Redis and the database are reachable and migrated")
            return
        await serve(settings, host or settings.web_host, port or settings.web_port, reuse_port)

    return run_async(run)


def main() -> None:
    cli()
