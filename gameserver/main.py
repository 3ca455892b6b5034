"""``gameserver``: the task-server console script.

    gameserver                 run until SIGTERM/SIGINT
    gameserver --check         check Redis, the DB and the schema: one line, exit 0 or not
    gameserver --burst         run what is due now, then exit

Configuration comes from the environment (``common.settings``), the game from
``GAME`` (``gameapi.load_game``); a bad value or a broken game prints one line
and exits with the error's code.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from typing import Any

import click

from common.entrypoint import serve_on, setup_logging
from common.errors import FatalError
from common.queue.handlers import HandlerRegistry
from common.settings import Settings, load_settings
from gameapi.loading import handler_registry, load_game
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.status import StatusPublisher
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick

log = logging.getLogger("gameserver")


def game_registry(settings: Settings) -> HandlerRegistry:
    """The built-in kinds plus the handlers of the game ``GAME`` names."""
    registry = handler_registry(load_game(settings.game), settings)
    builtin.register(registry)
    return registry


async def _serve(server: TaskServer) -> None:
    loop = asyncio.get_running_loop()
    this = asyncio.current_task()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            log.info("stopping: finishing the batches in hand (signal again to abandon them)")
            server.stop()
        elif this is not None:
            this.cancel()  # abandon: unacked batches return to *due* when their lease expires

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        await server.run()
    except asyncio.CancelledError:
        log.warning("stopped without finishing the batches in hand")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--check", is_flag=True, help="Connect, verify, exit 0 (ok) or non-zero.")
@click.option("--burst", is_flag=True, help="Run every event due now, then exit.")
@click.option("--batch-size", type=click.IntRange(1, 4000), help="Events per claim.")
@click.option("--claim-lease-ms", type=click.IntRange(100), help="In-flight batch lease.")
@click.option(
    "--partition-lease-ms", type=click.IntRange(200), help="Partition lease TTL (takeover time)."
)
@click.option(
    "--event-gather-ms",
    type=click.IntRange(0, 1000),
    help="Durable events of all partitions coming this close gather into one transaction "
    "(default 50; 0: only those that wait for a busy runner).",
)
@click.option("--no-tick", is_flag=True, help="Do not run the per-second resource tick.")
def main(
    check: bool,
    burst: bool,
    batch_size: int | None,
    claim_lease_ms: int | None,
    partition_lease_ms: int | None,
    event_gather_ms: int | None,
    no_tick: bool,
) -> None:
    """Run the task server: timed events of the queue partitions this process holds."""
    try:
        settings = load_settings()
        setup_logging(settings.log_level)
        tuning: dict[str, Any] = {}
        if batch_size:
            tuning["batch_size"] = batch_size
        if claim_lease_ms:
            tuning["claim_lease_ms"] = claim_lease_ms
            tuning["renew_every_ms"] = max(claim_lease_ms // 3, 1)
        if partition_lease_ms:
            tuning["partition_lease_ttl_ms"] = partition_lease_ms
            tuning["partition_heartbeat_ms"] = max(partition_lease_ms // 5, 1)
        if event_gather_ms is not None:
            tuning["event_gather_ms"] = event_gather_ms
        config = TaskServerConfig(**tuning)
        registry = game_registry(settings)
        server = TaskServer(settings, registry, config=config, burst=burst)
        if not (burst or check or no_tick):
            ShardedTick(server)
        if not (burst or check):
            StatusPublisher.attach(server)  # what the operator console shows
        gc.freeze()  # what was loaded at start lives on: keep it out of full GC passes
        if check:  # one line: what a healthcheck's log shows
            click.echo("ok: " + "; ".join(asyncio.run(server.check())))
            return
        serve_on(settings.event_loop, _serve(server))
    except FatalError as exc:
        click.echo(f"gameserver: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ValueError as exc:  # a tuning option out of range
        click.echo(f"gameserver: {exc}", err=True)
        sys.exit(2)
