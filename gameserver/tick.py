"""The sharded per-second resource tick.

Every second APScheduler fires ``TickRunner.tick``; shard ``floor(now_s) % S``
is materialized with one set-based UPDATE (``db.stock.tick_statement``) by the
process that holds that shard's lease. A tick that runs late, twice or not at
all changes nothing in the result (each row carries its own ``updated_ms``), so
leases only need to be mostly exclusive. Overruns are counted and skipped,
never queued behind (``coalesce`` and ``max_instances=1``).
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
from prometheus_client import Counter, Gauge, Histogram
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import SYSTEM_CLOCK, Clock
from db.stock import tick_shard
from gameserver.leases import LeaseManager

if TYPE_CHECKING:
    from gameserver.taskserver import TaskServer

log = logging.getLogger("gameserver.tick")

TICK_INTERVAL_MS = 1_000
TICK_JOB_ID = "tick"
TICK_LEASE_GROUP = "tick-shards"
SHARD_LEASE_TTL_MS = 5_000  # a dead owner's shards are taken over within this
SHARD_HEARTBEAT_MS = 1_000
TICK_SECONDS = Histogram(
    "tick_shard_seconds",
    "Duration of one shard's tick UPDATE",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0),
)
TICK_VILLAGES = Counter("tick_villages_total", "Village rows materialized by the tick")
TICK_OVERRUNS = Counter("tick_overruns_total", "Ticks skipped because the previous one still ran")
TICK_LAG = Gauge("tick_lag_seconds", "Delay between a tick's second and its start")


class TickRunner:
    """Ticks the shards this process owns; ``owns(shard)`` answers from the shard leases."""

    def __init__(
        self,
        engine: AsyncEngine,
        shards: int,
        owns: Callable[[int], bool],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.engine = engine
        self.shards = shards
        self.owns = owns
        self.clock = clock
        self.ticks_run = 0
        self.overruns = 0
        self._scheduler: AsyncIOScheduler | None = None

    def shard_at(self, now_ms: int) -> int:
        return (now_ms // TICK_INTERVAL_MS) % self.shards

    async def run_shard(self, shard: int, now_ms: int) -> int:
        """Materialize one shard at ``now_ms``; returns the rows updated."""
        started = time.perf_counter()
        async with self.engine.connect() as conn:
            rows = await tick_shard(conn, shard, now_ms)
        TICK_SECONDS.observe(time.perf_counter() - started)
        TICK_VILLAGES.inc(rows)
        self.ticks_run += 1
        return rows

    async def tick(self) -> None:
        now_ms = self.clock.now_ms()
        TICK_LAG.set((now_ms % TICK_INTERVAL_MS) / 1000)
        shard = self.shard_at(now_ms)
        if not self.owns(shard):
            return
        try:
            await self.run_shard(shard, now_ms)
        except Exception:  # a failed tick is recomputed by the next rotation
            log.exception("tick of shard %d failed", shard)

    def _on_skip(self, event: JobExecutionEvent) -> None:
        self.overruns += 1
        TICK_OVERRUNS.inc()
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
        )
        self.runner.attach(server.scheduler)
        self.leases = leases
        self._task = asyncio.create_task(leases.run(), name="tick-leases")

    async def _stop(self, server: TaskServer) -> None:
        if self.leases is None or self._task is None:
            return
        self.leases.stop()
        with contextlib.suppress(Exception):
            await self._task
        await self.leases.release_all()
