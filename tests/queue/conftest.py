"""Queue fixtures: queues on the test Redis under the test's prefix, workers, a manual clock."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue import Event, EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.queue.gathered import GatheredRuns
from common.queue.handlers import HandlerRegistry
from common.queue.worker import PartitionWorker
from common.settings import Settings
from db.engine import session_factory
from db.models import ProcessedEvent, ScheduledEvent
from gameserver.config import TaskServerConfig
from gameserver.metrics import QueueMetrics
from gameserver.wake import WakeListener
from tests.queue.testgame import effects, reset_effects

ROOT = Path(__file__).resolve().parents[2]
START_MS = 1_800_000_000_000  # after the id epoch, so ids order like creation times


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
async def make_queue(
    redis: Redis, redis_prefix: str, clock: ManualClock
) -> AsyncIterator[Callable[..., EventQueue]]:
    made: list[EventQueue] = []

    def make(partitions: int = 4, client: Any = None, **kwargs: Any) -> EventQueue:
        q = EventQueue(
            client or redis,
            prefix=redis_prefix,
            partitions=partitions,
            clock=kwargs.pop("clock", clock),
            ids=kwargs.pop("ids", IdGenerator(clock, node=1)),
            **kwargs,
        )
        made.append(q)
        return q

    yield make
    for q in made:
        await q.aclose()


@pytest.fixture
def queue(make_queue: Callable[..., EventQueue]) -> EventQueue:
    return make_queue()


class Workers:
    """Runs partition workers as tasks, woken by a real wake-up listener; stops them after."""

    def __init__(self, redis: Redis, prefix: str) -> None:
        self.running: list[tuple[PartitionWorker, asyncio.Task[None]]] = []
        self.listener = WakeListener(redis, prefix)
        self._listening: asyncio.Task[None] | None = None

    def start(
        self,
        queue: EventQueue,
        registry: HandlerRegistry,
        partition: int = 0,
        *,
        sessions: async_sessionmaker[AsyncSession] | None = None,
        gathered: GatheredRuns | None = None,
        metrics: QueueMetrics | None = None,
        **config: Any,
    ) -> PartitionWorker:
        config.setdefault("max_idle_ms", 60_000)
        worker = PartitionWorker(
            queue,
            partition,
            registry,
            sessions=sessions,
            config=TaskServerConfig(**config),
            metrics=metrics or QueueMetrics(),
            gathered=gathered,
        )
        if self._listening is None:
            self._listening = asyncio.create_task(self.listener.run())
        self.listener.attach(partition, worker)
        self.running.append((worker, asyncio.create_task(worker.run())))
        return worker

    async def stop(self) -> None:
        for worker, _ in self.running:
            worker.stop()
        for _, task in self.running:
            await asyncio.wait_for(task, 10)
        self.running.clear()
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening


@pytest.fixture
async def workers(redis: Redis, redis_prefix: str) -> AsyncIterator[Workers]:
    w = Workers(redis, redis_prefix)
    yield w
    await w.stop()


async def eventually(
    check: Callable[[], Awaitable[bool]],
    timeout_s: float = 20.0,
    *,
    alive: Sequence[asyncio.Task[Any]] = (),
) -> None:
    """Wait until ``check()`` is true (fails after ``timeout_s``: never a timed assertion).

    ``alive`` are the tasks doing the work (a task server, say): if one of them ends, the
    condition will not come, and its exception (or its end) fails the wait at once.
    """
    deadline = time.monotonic() + timeout_s
    while not await check():
        for task in alive:
            if task.done():
                failure = None if task.cancelled() else task.exception()
                raise AssertionError(f"{task.get_name()} ended while waiting: {failure!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached in {timeout_s} s")
        await asyncio.sleep(0.02)


async def commit_events(
    sessions: async_sessionmaker[AsyncSession], queue: EventQueue, new: list[NewEvent]
) -> list[Event]:
    """What a game command does: rows in its transaction, index after the commit."""
    async with sessions() as session, session.begin():
        events = await add_durable_events(session, new, clock=queue.clock, ids=queue.ids)
    await queue.index(events)
    return events


async def at_rest(queue: EventQueue, depth: int) -> None:
    """Wait until ``depth`` events wait in *due* and nothing is in flight (the worker put
    its failed events back and acked the rest)."""

    async def check() -> bool:
        stats = await queue.stats()
        return sum(s.depth for s in stats) == depth and sum(s.inflight for s in stats) == 0

    await eventually(check)


async def settle(clock: ManualClock) -> None:
    """After ``clock`` moved: wait until the test's one worker has looked at the new time and
    gone back to sleep, so whatever was due has run (before asserting that nothing did)."""

    async def slept_on() -> bool:
        return clock.slept_on()

    await eventually(slept_on)


@pytest.fixture
async def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    await reset_effects(engine)
    return session_factory(engine)


async def counts(sessions: async_sessionmaker[AsyncSession]) -> dict[str, int]:
    """Rows of: processed events, effects, distinct effect event ids, pending events."""
    async with sessions() as s:
        return {
            "processed": await s.scalar(select(func.count()).select_from(ProcessedEvent)) or 0,
            "effects": await s.scalar(select(func.count()).select_from(effects)) or 0,
            "distinct": await s.scalar(select(func.count(effects.c.event_id.distinct()))) or 0,
            "pending": await s.scalar(select(func.count()).select_from(ScheduledEvent)) or 0,
        }


def server_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=settings.database_url,
        REDIS_URL=settings.redis_url,
        REDIS_PREFIX=settings.redis_prefix,
        QUEUE_PARTITIONS=str(settings.queue_partitions),
        GAMESERVER_METRICS_PORT="0",
        LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


class Servers:
    """Task-server subprocesses (``python -m gameserver``) killed at the end of the test."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gameserver", *args],
            cwd=ROOT,
            env={"GAME": "tests.queue.testgame", **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            if proc.stderr:
                proc.stderr.close()


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.stop_all()
