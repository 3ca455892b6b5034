"""The task server: holds partition leases and runs one worker per partition it holds.

Besides the workers it runs the wake-up listener, the reconciler, the metrics
endpoint, the clock-skew check and an APScheduler ``AsyncIOScheduler`` that
the tick and periodic jobs plug into (``add_job``: once per world, leased,
``gameserver.jobs``; or once per process).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from redis.asyncio.cluster import RedisCluster
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from common import supervise
from common.clock import SYSTEM_CLOCK, Clock, ClockCheck, is_simulated
from common.errors import FatalError
from common.fastredis import FastRedis
from common.node_lease import NodeLease
from common.queue.constants import PARTITION_LEASE_GROUP
from common.queue.eventqueue import EventQueue
from common.queue.gathered import GatheredRuns
from common.queue.handlers import HandlerRegistry, Job
from common.queue.reconciler import Reconciler
from common.queue.tx import WorldShape
from common.queue.worker import PartitionWorker, is_unavailable
from common.redis_conn import AnyRedis, connect_redis
from common.settings import Settings
from db.engine import check_database, create_engine, session_factory
from db.migrate import current_revision, require_current
from gameapi.loading import load_game
from gameapi.stocks import stocks_of
from gameserver.config import TaskServerConfig
from gameserver.jobs import JobContext, JobMetrics, WorldJob
from gameserver.leases import LeaseManager
from gameserver.metrics import MetricsServer, QueueMetrics
from gameserver.retention import Retention
from gameserver.wake import WakeListener

log = logging.getLogger(__name__)

LAG_WARN_MS = 5_000  # events waiting this long past their due time are worth a warning
WARN_EVERY_S = 60.0  # a warning that keeps holding is repeated this often

Hook = Callable[["TaskServer"], Awaitable[None]]


@dataclass(slots=True)
class _Running:
    worker: PartitionWorker
    task: asyncio.Task[None]


class TaskServer:
    """Runs the timed events of the partitions this process holds, until ``stop()``.

    ``burst=True`` takes every free partition, runs what is due now and
    returns (for tests and one-off catch-up runs; do not mix with running
    servers).
    """

    def __init__(
        self,
        settings: Settings,
        registry: HandlerRegistry,
        clock: Clock = SYSTEM_CLOCK,
        *,
        config: TaskServerConfig | None = None,
        burst: bool = False,
        owner: str | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        # the game's stock statements, for its handlers (``Tx.stocks``) and the tick
        self.stocks = stocks_of(load_game(settings.game))
        self.clock = clock
        self.config = config or TaskServerConfig()
        self.burst = burst
        self.owner = owner
        self.metrics = QueueMetrics()
        self.scheduler = AsyncIOScheduler()
        self.redis: AnyRedis | None = None
        self.fast: FastRedis | None = None
        self.engine: AsyncEngine | None = None
        self.sessions: async_sessionmaker[AsyncSession] | None = None
        self.queue: EventQueue | None = None
        self.leases: LeaseManager | None = None
        self.reconciler: Reconciler | None = None
        self.wake: WakeListener | None = None
        self.metrics_server: MetricsServer | None = None
        self.node_lease: NodeLease | None = None
        self.clock_check: ClockCheck | None = None
        self.retention: Retention | None = None
        self.started = asyncio.Event()  # set after the first lease heartbeat
        self._stop = asyncio.Event()
        self._workers: dict[int, _Running] = {}
        self._exported: set[int] = set()  # partitions whose gauges this process exports
        self._startup: list[Hook] = []
        self._warned: dict[str, float] = {}  # what -> monotonic time of its last warning
        self._orphaned_since: float | None = None
        self._shutdown_hooks: list[Hook] = []
        self._world_jobs: list[WorldJob] = []
        self._pending_jobs: list[tuple[str, Callable[[], Awaitable[object]], float, Any]] = []
        self._job_metrics: JobMetrics | None = None
        self.gathered: GatheredRuns | None = None  # durable groups run together (``_open``)

    # --- extension points -------------------------------------------------------

    def add_job(
        self,
        func: Callable[[], Awaitable[object]],
        seconds: float,
        *,
        name: str | None = None,
        per_process: bool = False,
        **options: Any,
    ) -> None:
        """Run ``func()`` every ``seconds``, once per world however many task servers run
        (``gameserver.jobs``: leased, moved to another server when its holder dies).

        ``per_process=True``: run it in every task server (per-process work, such as
        refreshing this process's gauges). Overruns coalesce, never stack.
        """
        options.setdefault("coalesce", True)
        options.setdefault("max_instances", 1)
        if per_process:
            self.scheduler.add_job(func, "interval", seconds=seconds, name=name, **options)
            return
        job_name: str = name or str(getattr(func, "__name__", "job"))
        if any(j.name == job_name for j in self._world_jobs):
            raise ValueError(f"a job named {job_name!r} is already added")
        if self.redis is None:  # not running yet: started by run()
            self._pending_jobs.append((job_name, func, seconds, options))
        else:
            self._start_job(job_name, func, seconds, options)

    def _start_job(
        self,
        name: str,
        func: Callable[[], Awaitable[object]],
        seconds: float,
        options: dict[str, Any],
    ) -> None:
        assert self.redis is not None
        if self._job_metrics is None:
            self._job_metrics = JobMetrics(self.metrics.registry)
        job = WorldJob(
            name, func, seconds, self.redis, prefix=self.settings.redis_prefix,
            owner=self.owner, metrics=self._job_metrics,
            may_run=lambda: self.clock_ok() and not self._stop.is_set(),
            sidelined=self._clock_bad,
        )  # fmt: skip
        self._world_jobs.append(job)
        job.started(self.supervised_task(f"job-{name}-lease", job.leases.run))
        self.scheduler.add_job(job.poll, "interval", seconds=job.poll_s, name=name, **options)

    def job_context(self) -> JobContext:
        """What a game's periodic job gets (``HandlerRegistry.add_job``)."""
        assert self.redis is not None and self.sessions is not None and self.queue is not None
        return JobContext(self.settings, self.redis, self.sessions, self.clock, self.queue)

    def on_startup(self, hook: Hook) -> None:
        """Await ``hook(server)`` once Redis and the DB are open (e.g. to start shard leases)."""
        self._startup.append(hook)

    def on_shutdown(self, hook: Hook) -> None:
        self._shutdown_hooks.append(hook)

    def supervised_task(self, name: str, loop: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run ``loop`` as a task that is restarted (and logged, and counted) if it crashes;
        the caller stops it (for example from an ``on_shutdown`` hook)."""
        crashed = self.metrics.crashes
        return supervise.start(name, loop, on_crash=lambda task: crashed.labels(task).inc())

    def _clock_bad(self) -> bool:
        return not self.clock_ok()

    def clock_ok(self) -> bool:
        """False while this host's clock is too far off Redis to run handlers or the tick."""
        return self.clock_check is None or self.clock_check.ok

    @property
    def held(self) -> frozenset[int]:
        return self.leases.held if self.leases is not None else frozenset()

    def stop(self) -> None:
        """Ask the server to stop: workers finish their batch, leases are handed back."""
        self._stop.set()

    # --- open and close ------------------------------------------------------------

    async def _open(self) -> None:
        settings = self.settings
        if settings.is_sqlite and sqlite3.sqlite_version_info < (3, 35):
            raise FatalError(
                f"DATABASE_URL: SQLite {sqlite3.sqlite_version} lacks DELETE ... RETURNING, "
                "which the queue's exactly-once path needs; use SQLite 3.35+ or PostgreSQL"
            )
        self.redis = await connect_redis(settings)
        # the batches' snapshot bumps and event indexes go out on one pipelined connection
        # (on a cluster, through the cluster client: ``Committed.finish`` without it)
        if not isinstance(self.redis, RedisCluster):
            self.fast = FastRedis(settings.redis_url)
        self.engine = create_engine(settings, **_pool(settings))
        await check_database(self.engine)
        if settings.is_sqlite:
            await _warm_sqlite_pool(self.engine, _pool(settings)["pool_size"])
        await require_current(self.engine, settings)
        self.sessions = session_factory(self.engine)
        self.queue = EventQueue(
            self.redis,
            prefix=settings.redis_prefix,
            partitions=settings.queue_partitions,
            clock=self.clock,
        )
        await self.queue.load_scripts()
        cfg = self.config
        if cfg.event_slots:
            self.gathered = GatheredRuns(
                slots=cfg.event_slots, max_batch=cfg.event_batch, gather_ms=cfg.event_gather_ms
            )

    async def _close(self) -> None:
        if self.gathered is not None:  # the workers stopped: only a runner may be in flight
            await self.gathered.close()
            self.gathered = None
        if self.queue is not None:
            await self.queue.aclose()
        if self.fast is not None:
            await self.fast.close()
            self.fast = None
        if self.redis is not None:
            await self.redis.aclose()
            self.redis = None
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None

    async def check(self) -> list[str]:
        """Connect to Redis and the DB and verify the schema; return a line per check.

        Raises a FatalError (UnreachableError, MigrationError) naming what is wrong.
        """
        try:
            await self._open()
            assert self.redis is not None and self.engine is not None
            kind = "cluster" if isinstance(self.redis, RedisCluster) else "single node"
            revision = await current_revision(self.engine, self.settings)
            return [
                f"redis: ok ({kind}, prefix {self.settings.redis_prefix!r})",
                f"database: ok (schema revision {revision})",
                f"handlers: {', '.join(self.registry.kinds()) or 'none'}",
            ]
        finally:
            await self._close()

    # --- running -------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until ``stop()`` (or, in burst mode, until nothing is due)."""
        try:
            await self._open()
        except BaseException:
            await self._close()
            raise
        assert self.redis is not None and self.queue is not None and self.sessions is not None
        cfg = self.config
        background: list[asyncio.Task[None]] = []
        lease_task: asyncio.Task[None] | None = None
        gc_before = gc.get_threshold()
        if cfg.gc_gen0_threshold is not None:
            gc.set_threshold(cfg.gc_gen0_threshold, *gc_before[1:])
        try:
            # ids of follow-up events (and of the game's rows) unique among the world's
            # processes: every IdGenerator of this process uses the leased node
            if not is_simulated(self.clock):
                self.clock_check = ClockCheck(
                    self.redis,
                    self.clock,
                    warn_ms=self.settings.clock_skew_warn_ms,
                    max_ms=self.settings.clock_skew_max_ms,
                    registry=self.metrics.registry,
                    what="task server",
                )
                await self.clock_check.check()  # before any handler or tick runs
                background.append(self.supervised_task("clock-check", self.clock_check.run))
            self.node_lease = NodeLease(self.redis, self.settings.redis_prefix, owner=self.owner)
            await self.node_lease.acquire()
            background.append(self.supervised_task("id-node-lease", self.node_lease.run))
            port = self.settings.gameserver_metrics_port
            if port:
                host = self.settings.gameserver_metrics_host
                try:
                    self.metrics_server = self.metrics.serve(port, host)
                except OSError as exc:
                    raise FatalError(
                        f"GAMESERVER_METRICS_HOST/PORT: cannot listen on {host}:{port}: {exc}"
                    ) from None
            for hook in self._startup:
                await hook(self)
            self.wake = WakeListener(self.redis, self.settings.redis_prefix)
            background.append(self.supervised_task("wake-listener", self.wake.run))
            self.reconciler = Reconciler(
                self.queue,
                self.sessions,
                lambda: self.held,
                every_ms=cfg.reconcile_every_ms,
                marker_check_ms=cfg.marker_check_ms,
                metrics=self.metrics,
            )
            if not self.burst:
                background.append(self.supervised_task("reconciler", self.reconciler.run))
            self.leases = LeaseManager(
                self.redis,
                prefix=self.settings.redis_prefix,
                group=PARTITION_LEASE_GROUP,
                count=self.settings.queue_partitions,
                ttl_ms=cfg.partition_lease_ttl_ms,
                heartbeat_ms=cfg.partition_heartbeat_ms,
                owner=self.owner,
                greedy=self.burst,
                on_change=self._on_change,
                before_release=self._before_release,
                sidelined=self._clock_bad,
            )
            lease_task = self.supervised_task("partition-leases", self.leases.run)
            self.add_job(
                self._refresh_stats, cfg.stats_every_s, name="queue-stats", per_process=True
            )
            if not self.burst:  # a burst run is a one-off catch-up: no periodic jobs
                self.retention = Retention(
                    self.settings, self.sessions, self.queue, self.clock, self.metrics.registry
                )
                self.add_job(self.retention.run, self.settings.retention_every_s, name="retention")
                self._start_world_jobs()
            self.scheduler.start()
            if self.burst:
                await self._until_drained()
            else:
                await self._stop.wait()
        finally:
            await self._shutdown(background, lease_task)
            gc.set_threshold(*gc_before)

    def _start_world_jobs(self) -> None:
        for job in self.registry.jobs:  # the game's, with the context they take

            def call(func: Job = job.func) -> Awaitable[None]:
                return func(self.job_context())

            self.add_job(call, job.seconds, name=job.name)
        pending, self._pending_jobs = self._pending_jobs, []
        for name, func, seconds, options in pending:
            self._start_job(name, func, seconds, options)

    async def _until_drained(self) -> None:
        everything = frozenset(range(self.settings.queue_partitions))
        while not self._stop.is_set():
            running = list(self._workers.values())
            if (
                self.held == everything
                and len(running) == len(everything)
                and all(r.worker.drained.is_set() and r.task.done() for r in running)
            ):
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self._stop.wait()

    async def _shutdown(
        self, background: list[asyncio.Task[None]], lease_task: asyncio.Task[None] | None
    ) -> None:
        if self.leases is not None:
            self.leases.stop()
        if lease_task is not None:
            with contextlib.suppress(Exception):
                await lease_task
        await self._stop_workers(list(self._workers))
        if self.leases is not None:
            await self.leases.release_all()  # others take over at once, not after the TTL
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        for job in self._world_jobs:
            await job.stop()
        self._world_jobs.clear()
        if self.clock_check is not None:
            self.clock_check.stop()  # a cancel that lands in a Redis call may be swallowed
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if self.node_lease is not None:
            await self.node_lease.release()
            self.node_lease = None
        for hook in self._shutdown_hooks:
            try:
                await hook(self)
            except Exception:
                log.exception("shutdown hook failed")
        if self.metrics_server is not None:
            self.metrics_server.close()
            self.metrics_server = None
        await self._close()

    # --- partitions ----------------------------------------------------------------------

    async def _on_change(self, held: frozenset[int]) -> None:
        assert self.queue is not None and self.reconciler is not None
        self.metrics.held.set(len(held))
        for p, running in list(self._workers.items()):
            if running.task.done():
                if self.burst and running.worker.drained.is_set():
                    continue  # a burst runs each partition once
                del self._workers[p]
                if self.wake is not None:
                    self.wake.detach(p)
                if p not in held:
                    self.metrics.forget_partition(p)
            elif p not in held:
                running.worker.stop()  # lease lost: finish the batch in hand and stop
        for p in self._exported - held:
            self.metrics.forget_partition(p)
        self._exported = set(held)
        new = sorted(p for p in held if p not in self._workers)
        if new and not self._stop.is_set():
            for p in new:
                # the previous owner is gone: its in-flight batches run again at once
                await self.queue.recover(p)
            if self.burst:
                await self.reconciler.reconcile(new)
            else:
                self.reconciler.request(new)
            for p in new:
                self._start(p)
        self.started.set()

    def _start(self, partition: int) -> None:
        assert self.queue is not None and self.leases is not None and self.wake is not None
        worker = PartitionWorker(
            self.queue,
            partition,
            self.registry,
            sessions=self.sessions,
            config=self.config,
            metrics=self.metrics,
            lease_valid=self.leases.valid,
            burst=self.burst,
            world_speed=self.settings.world_speed,
            stocks=self.stocks,
            may_run=self.clock_ok,
            world=WorldShape(self.settings.map_radius, self.settings.tick_shards),
            fast=self.fast,
            gathered=self.gathered,
        )
        self.wake.attach(partition, worker)
        task = asyncio.create_task(self._supervise(worker), name=f"partition-{partition}")
        self._workers[partition] = _Running(worker, task)

    async def _supervise(self, worker: PartitionWorker) -> None:
        """Run a worker; restart it after an error (Redis or the DB down, a bug), waiting
        longer after each failure in a row. Its batch in hand returns to *due* unharmed:
        no attempt is counted against its events."""
        assert self.queue is not None
        failures = 0
        while True:
            started = time.monotonic()
            try:
                await worker.run()
                return
            except Exception as exc:
                if time.monotonic() - started > 60:
                    failures = 0
                failures += 1
                delay = min(self.config.restart_backoff_s * 2 ** (failures - 1), 30.0)
                log.error(
                    "partition %d: worker stopped (%s); restarting in %.1f s",
                    worker.partition, exc, delay, exc_info=not is_unavailable(exc),
                )  # fmt: skip
            if worker.stopping or self._stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            with contextlib.suppress(Exception):
                await self.queue.recover(worker.partition)

    async def _before_release(self, partition: int) -> None:
        await self._stop_workers([partition])
        self.metrics.forget_partition(partition)

    async def _stop_workers(self, partitions: list[int]) -> None:
        running = [self._workers[p] for p in partitions if p in self._workers]
        for r in running:
            r.worker.stop()
        tasks = [r.task for r in running]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self.config.shutdown_grace_s)
            for task in late:  # abandoned: its batch returns to *due* after its lease
                log.warning("%s did not finish its batch in time; abandoning it", task.get_name())
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for p in partitions:
            self._workers.pop(p, None)
            if self.wake is not None:
                self.wake.detach(p)

    async def _refresh_stats(self) -> None:
        if self.queue is None:
            return
        m = self.metrics
        now = time.monotonic()
        try:
            for s in await self.queue.stats(sorted(self.held)):
                if s.partition not in self.held:
                    continue  # released while we read: its new owner exports it
                if s.error is not None:  # its gauges keep their last values; the rest go on
                    if self._warn_due(f"stats-{s.partition}", now):
                        log.warning("partition %d: stats skipped: %s", s.partition, s.error)
                    continue
                label = str(s.partition)
                m.depth.labels(label).set(s.depth)
                m.ready.labels(label).set(s.ready)
                m.inflight.labels(label).set(s.inflight)
                m.dead_depth.labels(label).set(s.dead)
                m.lag.labels(label).set(s.lag_ms / 1000)
                if s.lag_ms >= LAG_WARN_MS and self._warn_due(f"lag-{s.partition}", now):
                    log.warning(
                        "partition %d: %d events are due and wait, the oldest for %.1f s "
                        "(see the worker's warnings for events held back)",
                        s.partition, s.ready, s.lag_ms / 1000,
                    )  # fmt: skip
        except Exception as exc:
            log.warning("queue stats refresh failed: %s", exc)
        await self._check_owners(now)

    async def _check_owners(self, now: float) -> None:
        """Partitions no live task server holds: their events wait until one does."""
        if self.leases is None or self.burst:
            return
        try:
            owned = await self.leases.owners()
        except Exception as exc:
            log.warning("reading the partition owners failed: %s", exc)
            return
        orphans = sorted(set(range(self.settings.queue_partitions)) - set(owned))
        if not orphans:
            self._orphaned_since = None
            self.metrics.unowned.set(0)
            return
        if self._orphaned_since is None:
            self._orphaned_since = now
        self.metrics.unowned.set(len(orphans))
        waited = now - self._orphaned_since
        if waited * 1000 >= LAG_WARN_MS and self._warn_due("owners", now):
            log.warning(
                "partitions %s have had no live task server for %.0f s: their events wait",
                orphans, waited,
            )  # fmt: skip

    def _warn_due(self, what: str, now: float) -> bool:
        """Rate-limit a repeating warning to one a minute."""
        if now - self._warned.get(what, -math.inf) < WARN_EVERY_S:
            return False
        self._warned[what] = now
        return True


def _pool(settings: Settings) -> dict[str, Any]:
    """Keep as many connections as the partition workers use at once (+ a job and the
    reconciler): an overflow connection is closed when it returns, so with more busy
    workers than kept connections every batch opened one anew (on SQLite a thread and
    four PRAGMAs), most of all right after an idle start, when all workers wake together.
    PostgreSQL keeps db.engine's ceiling of 30 connections; SQLite has no server to spare.
    (No pre-ping, as ``db.engine``'s pools: a batch checks out twice, its order reads and
    its transaction, and a flow of one-event batches paid more for pings than for its
    events.)"""
    kept = settings.queue_partitions + 2
    if settings.is_sqlite:
        kept = min(kept, 64)
        return {"pool_size": kept, "max_overflow": max(0, 15 - kept)}
    kept = min(kept, 30)
    return {"pool_size": kept, "max_overflow": 30 - kept}


async def _warm_sqlite_pool(engine: AsyncEngine, n: int) -> None:
    """Open ``n`` pooled connections before the first claim (SQLite: each is a thread of
    aiosqlite's and a few PRAGMAs), so the first batches after an idle start find them."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(n):
            await stack.enter_async_context(engine.connect())
