"""``queue`` commands for the management CLI: status, dead letters, requeue, drop.

``queue_cli`` is a click group; the management CLI adds it with
``cli.add_command(queue_cli)``. Settings come from the environment, or from
``ctx.obj`` when the parent command put a ``Settings`` there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK
from common.errors import FatalError
from common.queue import deadletters
from common.queue.eventqueue import EventQueue
from common.queue.events import PartitionStats
from common.redis_conn import connect_redis
from common.settings import Settings, load_settings
from db.engine import check_database, create_engine, session_factory
from db.migrate import require_current

T = TypeVar("T")


def _settings(ctx: click.Context) -> Settings:
    obj = ctx.find_object(Settings)
    if obj is not None:
        return obj
    if ctx.obj is not None and isinstance(getattr(ctx.obj, "settings", None), Settings):
        return ctx.obj.settings  # type: ignore[no-any-return]
    return load_settings()


def _run(ctx: click.Context, work: Callable[[EventQueue, Settings], Awaitable[T]]) -> T:
    """Run ``work`` with a queue on the configured Redis; one-line errors, exit codes."""

    async def main(settings: Settings) -> T:
        redis = await connect_redis(settings)
        queue = EventQueue(
            redis,
            prefix=settings.redis_prefix,
            partitions=settings.queue_partitions,
            clock=SYSTEM_CLOCK,
        )
        try:
            return await work(queue, settings)
        finally:
            await queue.aclose()
            await redis.aclose()

    try:
        return asyncio.run(main(_settings(ctx)))
    except FatalError as exc:
        click.echo(f"queue: {exc}", err=True)
        sys.exit(exc.exit_code)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


@click.group("queue")
def queue_cli() -> None:
    """Inspect the timed-event queue: depth and lag, dead letters."""


@queue_cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per partition.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Depth, ready, in-flight, dead and lag of every partition."""

    async def work(queue: EventQueue, _: Settings) -> None:
        every = await queue.stats()
        rows = [s for s in every if s.error is None]
        broken = [s for s in every if s.error is not None]
        for s in broken:  # named, and left out of the table and its totals
            click.echo(f"queue: partition {s.partition} skipped: {s.error}", err=True)
        if as_json:
            for s in rows:
                click.echo(json.dumps(_row(s)))
            if broken:
                raise FatalError(f"{len(broken)} partition(s) could not be read")
            return
        click.echo(
            f"{'part':>4} {'depth':>9} {'ready':>9} {'inflight':>8} {'dead':>6} {'lag s':>8}"
            "  oldest due (UTC)"
        )
        for s in rows:
            click.echo(
                f"{s.partition:>4} {s.depth:>9} {s.ready:>9} {s.inflight:>8} {s.dead:>6} "
                f"{s.lag_ms / 1000:>8.1f}  {_when(s.oldest_due_ms)}"
            )
        total = [sum(getattr(s, f) for s in rows) for f in ("depth", "ready", "inflight", "dead")]
        worst = max((s.lag_ms for s in rows), default=0)
        depth, ready, inflight, dead_ = total
        click.echo(
            f"{'all':>4} {depth:>9} {ready:>9} {inflight:>8} {dead_:>6} {worst / 1000:>8.1f}"
        )
        if broken:
            raise FatalError(f"{len(broken)} partition(s) could not be read")

    _run(ctx, work)


def _row(s: PartitionStats) -> dict[str, Any]:
    return {f: getattr(s, f) for f in PartitionStats.__slots__}


@queue_cli.command("dead")
@click.option("--partition", type=int, help="Only this partition.")
@click.option("--limit", default=50, show_default=True, help="At most this many per partition.")
@click.pass_context
def dead(ctx: click.Context, partition: int | None, limit: int) -> None:
    """List dead events with their reason and attempt count."""

    async def work(queue: EventQueue, settings: Settings) -> None:
        async with _sessions(settings) as sessions:
            rows = await deadletters.list_dead(queue, sessions, limit)
        if partition is not None:
            rows = [d for d in rows if d.partition == partition]
        if not rows:
            click.echo("no dead events")
            return
        for d in rows:
            what = f"{d.kind} village {d.village_id}" if d.kind else "(unreadable)"
            where = f"p{d.partition}" if d.partition is not None else "db only"
            click.echo(
                f"{d.id}  {where}  {what}  attempts {d.attempts}  "
                f"died {_when(d.died_ms)}  error: {d.error}"
            )

    _run(ctx, work)


@contextlib.asynccontextmanager
async def _sessions(settings: Settings) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_engine(settings)
    try:
        # one line, not a traceback, when the database is out of reach or without the schema
        await check_database(engine)
        await require_current(engine, settings)
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def _targets(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    ids: tuple[int, ...],
    everything: bool,
) -> list[int]:
    if everything:
        return [d.id for d in await deadletters.list_dead(queue, sessions, limit=1_000_000)]
    return list(ids)


def _report(outcome: deadletters.Outcome) -> int:
    for event_id in outcome.not_dead:
        click.echo(f"{event_id}: not a dead event", err=True)
    return len(outcome.done)


@queue_cli.command("requeue")
@click.argument("event_ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Every dead event.")
@click.pass_context
def requeue(ctx: click.Context, event_ids: tuple[int, ...], everything: bool) -> None:
    """Run dead events again, in their place in the order, with their attempts reset."""
    if not event_ids and not everything:
        raise click.UsageError("name event ids or pass --all")

    async def work(queue: EventQueue, settings: Settings) -> int:
        async with _sessions(settings) as sessions:
            targets = await _targets(queue, sessions, event_ids, everything)
            return _report(await deadletters.requeue(queue, sessions, targets))

    click.echo(f"requeued {_run(ctx, work)} event(s)")


@queue_cli.command("drop")
@click.argument("event_ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Every dead event.")
@click.option("--yes", is_flag=True, help="Do not ask before dropping everything.")
@click.pass_context
def drop(ctx: click.Context, event_ids: tuple[int, ...], everything: bool, yes: bool) -> None:
    """Delete dead events for good, running their kind's compensation (troops go home,
    costs are refunded)."""
    if not event_ids and not everything:
        raise click.UsageError("name event ids or pass --all")
    if everything and not yes:
        click.confirm("Drop every dead event for good?", abort=True)

    async def work(queue: EventQueue, settings: Settings) -> int:
        from gameapi import load_game, stocks_of
        from gameserver.main import game_registry  # the game's compensations (no import cycle)

        registry = game_registry(settings)
        stocks = stocks_of(load_game(settings.game))
        async with _sessions(settings) as sessions:
            targets = await _targets(queue, sessions, event_ids, everything)
            outcome = await deadletters.drop(
                queue, sessions, registry, targets, stocks=stocks, world_speed=settings.world_speed
            )
            return _report(outcome)

    click.echo(f"dropped {_run(ctx, work)} event(s)")
