"""The sharded per-second resource tick.

Every second APScheduler fires ``TickRunner.tick``; shard ``floor(now_s) % S``
is materialized by ``Stocks.tick_shard`` (one set-based UPDATE, up to the
earliest pending event) in the process that holds that shard's lease. A tick
that runs late, twice or not at all changes nothing in the result (each row
carries its own ``updated_ms``), so leases only need to be mostly exclusive.
Overruns are counted and skipped, never queued behind (``coalesce`` and
``max_instances=1``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import SYSTEM_CLOCK, Clock
from db.stock import ShardTick, Stocks
from gameserver.leases import LeaseManager
from gameserver.metrics import TickMetrics

if TYPE_CHECKING:
    from gameserver.taskserver import TaskServer

log = logging.getLogger("gameserver.tick")

TICK_INTERVAL_MS = 1_000
TICK_JOB_ID = "tick"
TICK_LEASE_GROUP = "tick-shards"
SHARD_LEASE_TTL_MS = 5_000  # a dead owner's shards are taken over within this
SHARD_HEARTBEAT_MS = 1_000
HORIZON_WARN_MS = 5_000  # stocks settled this far behind now are worth a warning
WARN_EVERY_S = 60.0  # ... repeated this often while it lasts


class TickRunner:
    """Ticks the shards this process owns; ``owns(shard)`` answers from the shard leases."""

    def __init__(
        self,
        engine: AsyncEngine,
        shards: int,
        owns: Callable[[int], bool],
        clock: Clock = SYSTEM_CLOCK,
        metrics: TickMetrics | None = None,
        *,
        stocks: Stocks,
    ) -> None:
        self.stocks = stocks  # the game's: gameapi.stocks_of(game)
        self.engine = engine
        self.shards = shards
        self.owns = owns
        self.clock = clock
        self.metrics = metrics or TickMetrics()
        self.ticks_run = 0
        self.overruns = 0
        self._scheduler: AsyncIOScheduler | None = None
        self._warned: tuple[int, float] = (0, 0.0)  # (head event id, monotonic time)

    def shard_at(self, now_ms: int) -> int:
        return (now_ms // TICK_INTERVAL_MS) % self.shards

    async def run_shard(self, shard: int, now_ms: int) -> int:
        """Materialize one shard at ``now_ms``; returns the rows updated."""
        started = time.perf_counter()
        async with self.engine.connect() as conn:
            done = await self.stocks.tick_shard(conn, shard, now_ms)
        m = self.metrics
        m.seconds.observe(time.perf_counter() - started)
        m.villages.inc(done.rows)
        m.horizon_lag.set((now_ms - done.horizon_ms) / 1000)
        self._trace_horizon(now_ms, done)
        self.ticks_run += 1
        return done.rows

    def _trace_horizon(self, now_ms: int, done: ShardTick) -> None:
        """Say which event holds every village's stock back, when it holds it for long."""
        head = done.head
        if head is None or now_ms - done.horizon_ms < HORIZON_WARN_MS:
            return
        last_id, last_at = self._warned
        if head.id == last_id and time.monotonic() - last_at < WARN_EVERY_S:
            return
        self._warned = (head.id, time.monotonic())
        log.warning(
            "tick: stocks are settled only up to %.1f s ago: event %d (%s, village %d, "
            "due %d) has not run yet, and its follow-ups may still change production",
            (now_ms - done.horizon_ms) / 1000, head.id, head.kind, head.village_id,
            head.due_ms,
        )  # fmt: skip

    async def tick(self) -> None:
        now_ms = self.clock.now_ms()
        self.metrics.lag.set((now_ms % TICK_INTERVAL_MS) / 1000)
        shard = self.shard_at(now_ms)
        if not self.owns(shard):
            return
        try:
            await self.run_shard(shard, now_ms)
        except Exception:  # a failed tick is recomputed by the next rotation
            self.metrics.failures.inc()
            log.exception("tick of shard %d failed", shard)

    def _on_skip(self, event: JobExecutionEvent) -> None:
        self.overruns += 1
        self.metrics.overruns.inc()
        log.warning("tick overrun: a tick was skipped (%s)", event.code)

    def _on_event(self, event: JobExecutionEvent) -> None:
        if event.job_id == TICK_JOB_ID:
            self._on_skip(event)

    def attach(self, scheduler: AsyncIOScheduler) -> None:
        """Add the per-second tick job to ``scheduler`` (started by its owner)."""
        first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        scheduler.add_job(
            self.tick,
            "interval",
            seconds=TICK_INTERVAL_MS // 1000,
            start_date=first,  # aligned to whole seconds, like the shard rotation
            coalesce=True,
            max_instances=1,
            misfire_grace_time=1,
            id=TICK_JOB_ID,
        )
        scheduler.add_listener(self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)

    def start(self) -> None:
        """Run the tick on a scheduler of its own (without a task server)."""
        scheduler = AsyncIOScheduler(timezone=UTC)
        self.attach(scheduler)
        scheduler.start()
        self._scheduler = scheduler

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None


class ShardedTick:
    """The tick inside a task server: shard leases plus the per-second job.

    Shards are leased like queue partitions (group ``tick-shards``), so every
    shard is ticked by one live process and a dead owner's shards are taken
    over within ``SHARD_LEASE_TTL_MS``. A process ticks a shard only while its
    last heartbeat still covers the lease.
    """

    def __init__(self, server: TaskServer) -> None:
        self.leases: LeaseManager | None = None
        self.runner: TickRunner | None = None
        self._task: asyncio.Task[None] | None = None
        server.on_startup(self._start)
        server.on_shutdown(self._stop)

    async def _start(self, server: TaskServer) -> None:
        assert server.redis is not None and server.engine is not None
        leases = LeaseManager(
            server.redis,
            prefix=server.settings.redis_prefix,
            group=TICK_LEASE_GROUP,
            count=server.settings.tick_shards,
            ttl_ms=SHARD_LEASE_TTL_MS,
            heartbeat_ms=SHARD_HEARTBEAT_MS,
            owner=server.owner,
        )
        self.runner = TickRunner(
            server.engine,
            server.settings.tick_shards,
            owns=lambda shard: shard in leases.held and leases.valid(),
            clock=server.clock,
            metrics=TickMetrics(server.metrics.registry),
            stocks=server.stocks,
        )
        self.runner.attach(server.scheduler)
        self.leases = leases
        self._task = server.supervised_task("tick-leases", leases.run)

    async def _stop(self, server: TaskServer) -> None:
        if self.leases is None or self._task is None:
            return
        self.leases.stop()
        with contextlib.suppress(Exception):
            await self._task
        await self.leases.release_all()
