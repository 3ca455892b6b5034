"""``wgctl run``: the whole game on one machine, in one command.

Uses ``REDIS_URL`` when it answers, otherwise starts the embedded Valkey
server; migrates the database (SQLite by default); generates a small demo
world on first start; then runs the processes of the ``Procfile`` under honcho
and stops everything on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import click
from honcho.environ import parse_procfile
from honcho.manager import Manager
from sqlalchemy import func, select

from common.embedded_redis import EmbeddedRedis
from common.entrypoint import fail
from common.errors import FatalError, UnreachableError
from common.redis_conn import check_redis, create_redis
from common.settings import Settings, load_settings
from db.engine import check_database, create_engine
from db.migrate import upgrade
from db.models import Village
from db.worldgen import generate_world
from gameapi.loading import load_game
from gameapi.stocks import stocks_of
from wgctl import runfile

PROCFILE = Path(__file__).resolve().parent.parent / "Procfile"


async def redis_reachable(settings: Settings) -> bool:
    client = create_redis(settings)
    try:
        await check_redis(client, settings.redis_url)
        return True
    except UnreachableError:
        return False
    finally:
        await client.aclose()


async def prepare_database(settings: Settings, demo_players: int) -> int:
    """Migrate, and on an empty world generate ``demo_players`` bots; return the village count."""
    from wgctl.cli import bot_template

    engine = create_engine(settings)
    try:
        await check_database(engine)
        await upgrade(engine, settings)
        async with engine.connect() as conn:
            villages = int((await conn.execute(select(func.count(Village.id)))).scalar() or 0)
        if villages == 0 and demo_players > 0:
            summary = await generate_world(
                engine,
                players=demo_players,
                template=bot_template(settings),
                stocks=stocks_of(load_game(settings.game)),
                shards=settings.tick_shards,
                map_radius=settings.map_radius,
            )
            villages = summary.villages
    finally:
        await engine.dispose()
    return villages


@click.command()
@click.option("--demo-players", type=click.IntRange(0, 100_000), default=30, show_default=True)
def run(demo_players: int) -> None:
    """Start Redis if needed, migrate, seed a demo world, run task and web servers.

    Every process runs the game ``GAME`` names (default refgame)."""
    try:
        settings = load_settings()
        load_game(settings.game)  # a broken game stops here, before anything starts
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    running = runfile.live_run()
    if running is not None:
        fail(f"a local world already runs from this directory (pid {running.pid}, "
             f"{runfile.RUN_FILE}): stop it first")  # fmt: skip
    embedded: EmbeddedRedis | None = None
    wrote_run_file = False
    try:
        if not asyncio.run(redis_reachable(settings)):
            embedded = EmbeddedRedis().start()
            click.echo(
                f"no Redis at {settings.redis_url}: started embedded Valkey at {embedded.url}"
            )
            settings = load_settings(redis_url=embedded.url)
        villages = asyncio.run(prepare_database(settings, demo_players))
        click.echo(f"database ready ({villages} villages): {settings!r}")

        # the Procfile names console scripts: find them next to this Python (the venv's bin)
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {
            **os.environ,
            "PATH": path,
            "REDIS_URL": settings.redis_url,
            "DATABASE_URL": settings.database_url,
        }
        manager = Manager()
        for name, process in parse_procfile(PROCFILE.read_text()).processes.items():
            manager.add_process(name, process, env=env)
        # `wgctl status`, `wgctl queue ...` from this directory find this world through it
        runfile.write(settings, os.getpid())
        wrote_run_file = True
        click.echo(f"open http://{settings.web_host}:{settings.web_port}/  (Ctrl-C stops)")
        manager.loop()
        raise SystemExit(manager.returncode or 0)
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    finally:
        if wrote_run_file:
            runfile.remove(os.getpid())
        if embedded is not None:
            embedded.stop()
