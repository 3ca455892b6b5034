"""``wgctl``: operate a world from the command line."""

from __future__ import annotations

import importlib
import sys
import time
from functools import cached_property
from typing import Any

import click
from sqlalchemy import func, select

from common.entrypoint import fail, run_async, setup_logging
from common.errors import FatalError
from common.redis_conn import check_redis, create_redis
from common.settings import Settings
from db.engine import check_database, create_engine
from db.migrate import current_revision, head_revision, require_current, upgrade
from db.models import Player, ScheduledEvent, Village
from db.worldgen import generate_world
from gameapi.game import PlaceTemplate
from gameapi.loading import load_game
from gameapi.stocks import stocks_of
from wgctl import runfile


def _settings() -> Settings:
    """The managed world's settings: the environment's, pointed at the local run's world
    (``var/run.json``, ``wgctl.runfile``) unless ``REDIS_URL`` is set explicitly."""
    try:
        return runfile.world_settings()
    except FatalError as exc:
        fail(str(exc), exc.exit_code)


class _World:
    """``ctx.obj`` of every command: subcommand groups that live elsewhere (``queue``) read
    ``ctx.obj.settings``, resolved on first use like ``_settings()``."""

    @cached_property
    def settings(self) -> Settings:
        return _settings()


def bot_template(settings: Settings) -> PlaceTemplate:
    """A generated bot's first place, from the game ``GAME`` names."""
    try:
        game = load_game(settings.game)
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    template: PlaceTemplate = game.new_place(settings.world_speed, True)
    return template


@click.group()
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Operate a webgame world: database, world generation, status, local stack.

    Commands manage the world of the environment's settings or, when REDIS_URL is not set,
    the local world `wgctl run` runs from this directory (var/run.json)."""
    setup_logging("WARNING")
    ctx.obj = _World()


@cli.command()
def migrate() -> None:
    """Create or upgrade the database schema to the latest revision."""
    settings = _settings()

    async def run() -> None:
        engine = create_engine(settings)
        try:
            await check_database(engine)
            before = await current_revision(engine, settings)
            await upgrade(engine, settings)
            after = await current_revision(engine, settings)
        finally:
            await engine.dispose()
        click.echo(f"database migrated: {before or 'empty'} -> {after}")

    run_async(run)


@cli.command()
@click.option("--players", type=click.IntRange(1, 10_000_000), required=True)
@click.option("--villages-per-player", type=click.IntRange(1, 100), default=1, show_default=True)
@click.option("--seed", type=int, default=None, help="map placement seed (reproducible worlds)")
def worldgen(players: int, villages_per_player: int, seed: int | None) -> None:
    """Add PLAYERS bot players with their villages to the world (of the game GAME names)."""
    settings = _settings()
    template = bot_template(settings)

    async def run() -> None:
        engine = create_engine(settings)
        try:
            await check_database(engine)
            await require_current(engine, settings)
            started = time.perf_counter()
            try:
                summary = await generate_world(
                    engine,
                    players=players,
                    villages_per_player=villages_per_player,
                    template=template,
                    stocks=stocks_of(load_game(settings.game)),
                    shards=settings.tick_shards,
                    map_radius=settings.map_radius,
                    seed=seed,
                )
            except ValueError as exc:
                raise FatalError(str(exc)) from None
            elapsed = time.perf_counter() - started
        finally:
            await engine.dispose()
        click.echo(
            f"generated {summary.players} players and {summary.villages} villages "
            f"in {elapsed:.2f} s ({summary.villages / max(elapsed, 1e-9):,.0f} villages/s)"
        )

    run_async(run)


async def gather_status(settings: Settings) -> dict[str, Any]:
    status: dict[str, Any] = {"settings": repr(settings)}
    engine = create_engine(settings)
    try:
        await check_database(engine)
        status["db_revision"] = await current_revision(engine, settings)
        status["db_head"] = head_revision(settings)
        if status["db_revision"] is not None:
            async with engine.connect() as conn:
                for name, model in (
                    ("players", Player),
                    ("villages", Village),
                    ("pending_events", ScheduledEvent),
                ):
                    status[name] = (
                        await conn.execute(select(func.count()).select_from(model))
                    ).scalar()
    finally:
        await engine.dispose()
    redis = create_redis(settings)
    try:
        await check_redis(redis, settings.redis_url)
        info = await redis.info("server")
        status["redis_version"] = info.get("redis_version") or info.get("valkey_version")
    finally:
        await redis.aclose()
    return status


@cli.command()
def status() -> None:
    """Show the database revision, world size, pending events and Redis version."""
    settings = _settings()

    async def run() -> None:
        for key, value in (await gather_status(settings)).items():
            click.echo(f"{key:>15}: {value}")

    run_async(run)


@cli.group()
def operator() -> None:
    """Operator accounts of the web console under /admin."""


@operator.command("create")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def operator_create(name: str, password_stdin: bool) -> None:
    """Create the operator NAME (the password is asked for, or read from stdin)."""
    from webfront.admin.operators import NAME_RE, OperatorExists, create_operator
    from webfront.passwords import HashParams, hash_password

    if NAME_RE.fullmatch(name) is None:
        fail("operator name: 3 to 32 letters, digits, '.', '_' or '-'")
    settings = _settings()
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not 8 <= len(password) <= 128:
        fail("password: 8 to 128 characters")
    password_hash = hash_password(password, HashParams())

    async def run() -> None:
        engine = create_engine(settings)
        try:
            await check_database(engine)
            await require_current(engine, settings)
            try:
                operator_id = await create_operator(
                    engine, name, password_hash, int(time.time() * 1000)
                )
            except OperatorExists as exc:
                raise FatalError(str(exc)) from None
        finally:
            await engine.dispose()
        click.echo(f"operator {name} created (id {operator_id})")

    run_async(run)


@operator.command("list")
def operator_list() -> None:
    """List the operator accounts."""
    from webfront.admin.operators import list_operators

    settings = _settings()

    async def run() -> None:
        engine = create_engine(settings)
        try:
            await check_database(engine)
            await require_current(engine, settings)
            rows = await list_operators(engine)
        finally:
            await engine.dispose()
        if not rows:
            click.echo("no operators; create one with `wgctl operator create NAME`")
        for row in rows:
            created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row.created_ms / 1000))
            click.echo(f"{row.id:>5}  {row.name:<32}  created {created} UTC")

    run_async(run)


def _register_optional_groups() -> None:
    """Subcommand groups that live next to the code they operate (queue, run, ...)."""
    for module, attr in (("common.queue.cli", "queue_cli"), ("wgctl.localrun", "run")):
        try:
            command = getattr(importlib.import_module(module), attr)
        except ImportError:
            continue
        cli.add_command(command)


_register_optional_groups()


def main() -> None:
    sys.exit(cli())
