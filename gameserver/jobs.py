"""One-per-world periodic jobs: run every interval by one task server of the world.

A game registers a job with ``HandlerRegistry.add_job(name, func, seconds)``
(the framework's own, like the retention job, with ``TaskServer.add_job``).
Each job is leased like a tick shard: a lease group ``job:<name>`` of one
item, held by one live task server and taken over by another within
``JOB_LEASE_TTL_MS`` when its holder dies. The holder polls every
``JOB_POLL_S`` (or the interval, if shorter) and starts a run only when
``job_gate.lua`` says the last start, by any process, was an interval ago
(Redis clock): a run is never repeated within an interval, even while the
lease changes hands. A run that fails is logged and counted; the next one
comes an interval after it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter

from common.clock import Clock
from common.queue.scripts import load_script
from common.redis_conn import AnyRedis
from common.settings import Settings
from gameserver.leases import LeaseManager

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from common.queue.eventqueue import EventQueue

log = logging.getLogger(__name__)

JOB_LEASE_TTL_MS = 5_000  # a dead holder's jobs move to another task server within this
JOB_HEARTBEAT_MS = 1_000
JOB_POLL_S = 1.0  # the holder asks whether a run is due this often (or every interval)

_GATE = load_script("job_gate.lua", Path(__file__).parent)


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a game's periodic job gets: the world's settings, Redis, DB sessions and clock."""

    settings: Settings
    redis: AnyRedis
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    queue: EventQueue


class JobMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter(
            "gameserver_job_runs", "One-per-world job runs started here", ["job"], registry=registry
        )
        self.failures = Counter(
            "gameserver_job_failures", "One-per-world job runs that raised", ["job"],
            registry=registry,
        )  # fmt: skip


class WorldJob:
    """One leased job inside a task server: ``start`` its lease, ``poll`` on a timer, ``stop``."""

    def __init__(
        self,
        name: str,
        func: Callable[[], Awaitable[object]],
        seconds: float,
        redis: AnyRedis,
        *,
        prefix: str,
        owner: str | None,
        metrics: JobMetrics,
        may_run: Callable[[], bool] = lambda: True,
        sidelined: Callable[[], bool] | None = None,
        ttl_ms: int = JOB_LEASE_TTL_MS,
        heartbeat_ms: int = JOB_HEARTBEAT_MS,
    ) -> None:
        self.name = name
        self.func = func
        self.interval_ms = max(1, round(seconds * 1000))
        self.redis = redis
        self.may_run = may_run
        self.leases = LeaseManager(
            redis, prefix=prefix, group=f"job:{name}", count=1, ttl_ms=ttl_ms,
            heartbeat_ms=heartbeat_ms, owner=owner, sidelined=sidelined,
        )  # fmt: skip
        self._last_key = f"{prefix}:{{job:{name}}}:last"
        self._not_before = 0.0  # time.monotonic(): the gate said no run is due before this
        self._runs = metrics.runs.labels(name)
        self._failures = metrics.failures.labels(name)
        self._lease_task: asyncio.Task[None] | None = None

    @property
    def poll_s(self) -> float:
        return min(JOB_POLL_S, self.interval_ms / 1000)

    def holds(self) -> bool:
        return 0 in self.leases.held and self.leases.valid()

    async def poll(self) -> bool:
        """Run the job if this process holds it and a run is due; True if it ran."""
        if not self.holds() or not self.may_run() or time.monotonic() < self._not_before:
            return False
        wait_ms = int(await _GATE(self.redis, (self._last_key,), (self.interval_ms,)))
        if wait_ms > 0:
            self._not_before = time.monotonic() + wait_ms / 1000
            return False
        self._runs.inc()
        try:
            await self.func()
        except Exception:
            self._failures.inc()
            log.exception("job %s failed; it runs again in %.0f s", self.name,
                          self.interval_ms / 1000)  # fmt: skip
        return True

    async def stop(self) -> None:
        """Stop heartbeating and hand the lease back (another process takes it at once)."""
        self.leases.stop()
        if self._lease_task is not None:
            with contextlib.suppress(Exception):
                await self._lease_task
        await self.leases.release_all()

    def started(self, lease_task: asyncio.Task[None]) -> None:
        self._lease_task = lease_task
