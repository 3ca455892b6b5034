"""Ours: events through ``EventQueue`` and a real ``TaskServer``, timed by a recording handler."""

from __future__ import annotations

import array
import asyncio
import contextlib
import gc
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.queue.constants import BENCH_KIND, SCHEDULE_CALL
from common.errors import FatalError


@dataclass
class Recorder:
    """What the bench handler saw: lateness per event, first start and last end."""

    expected: int
    keep_due: bool = False  # record due times too (the steady run plots lateness over time)
    handled: int = 0
    ready_at: float | None = None  # when the task server's workers started
    first_start: float = math.inf
    last_end: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    progress: Any = None
    failed_calls: int = 0  # handler calls that raised or were cancelled (e.g. timed out)
    failed_events: int = 0  # their events: the worker re-runs them one by one
    slowest_call_s: float = 0.0
    recorded: int = 0  # entries written to the arrays below (redeliveries count again)

    def __post_init__(self) -> None:
        # Allocated and written to for every expected event before the task server runs:
        # arrays grown under the measured flow would take fresh pages from the kernel as
        # they fill (one every 512 events), and on a virtual machine a page the host has
        # not backed yet can stall the process, a stall the bench would charge to the
        # task server as lateness.
        self._lateness = array.array("d", [0.0]) * self.expected
        self._due = array.array("q", [0]) * (self.expected if self.keep_due else 0)

    @property
    def lateness_ms(self) -> array.array[float]:
        """Handler start - due time per event run, in the order they ran."""
        return self._lateness[: self.recorded]

    @property
    def due_ms(self) -> array.array[int]:
        """Due time per event run, in the same order (``keep_due``)."""
        return self._due[: self.recorded] if self.keep_due else array.array("q")

    def _record(self, now_ms: float, events: list[Any]) -> None:
        start, end = self.recorded, self.recorded + len(events)
        late = array.array("d", [now_ms - e.due_ms for e in events])
        if end <= len(self._lateness):
            self._lateness[start:end] = late
        else:  # more runs than expected (redeliveries): past the arrays' end
            del self._lateness[start:]
            self._lateness.extend(late)
        if self.keep_due:
            due = array.array("q", [e.due_ms for e in events])
            if end <= len(self._due):
                self._due[start:end] = due
            else:
                del self._due[start:]
                self._due.extend(due)
        self.recorded = end

    def window_s(self) -> float:
        """From the workers' start (or the first handler call) to the last handler's end."""
        start = self.ready_at if self.ready_at is not None else self.first_start
        return max(self.last_end - start, 1e-9)

    def wrap(self, handler: Callable[[Any, list[Any]], Awaitable[None]] | None) -> Any:
        async def handle(ctx: Any, events: list[Any]) -> None:
            started = time.perf_counter()
            now_ms = time.time() * 1000
            if started < self.first_start:
                self.first_start = started
            self._record(now_ms, events)
            if handler is not None:
                try:
                    await handler(ctx, events)
                except BaseException:
                    self.failed_calls += 1
                    self.failed_events += len(events)
                    raise
                finally:
                    self.slowest_call_s = max(self.slowest_call_s, time.perf_counter() - started)
            self.handled += len(events)
            self.last_end = time.perf_counter()
            if self.progress is not None:
                self.progress.update(len(events))
            if self.handled >= self.expected:
                self.done.set()

        return handle


def due_at(start_ms: int, i: int, rate: float | None) -> int:
    """The due time of event ``i``: all at ``start_ms``, or spread at ``rate`` per second."""
    return start_ms if rate is None else start_ms + int(i * 1000 / rate)


async def schedule_ours(
    queue: Any, events: int, start_ms: int, rate: float | None, progress: Any
) -> float:
    from common.queue import NewEvent

    started = time.perf_counter()
    for call_start in range(0, events, SCHEDULE_CALL):
        call_stop = min(events, call_start + SCHEDULE_CALL)
        chunk = [
            NewEvent(BENCH_KIND, i + 1, due_at(start_ms, i, rate), {"order_id": i + 1})
            for i in range(call_start, call_stop)
        ]
        await queue.schedule_many(chunk)
        progress.update(call_stop - call_start)
    return time.perf_counter() - started


def quiet_logs() -> None:
    for name in ("gameserver", "apscheduler", "webfront", "db", "refgame"):
        logging.getLogger(name).setLevel(logging.WARNING)


async def run_task_server(
    settings: Any,
    registry: Any,
    recorder: Recorder,
    *,
    burst: bool,
    batch: int,
    timeout_s: float,
    ready: asyncio.Event | None = None,
    partial_ok: bool = False,
    on_done: Callable[[], object] | None = None,
) -> float:
    """Run a TaskServer until the recorder saw every event; return the wall seconds.

    After ``timeout_s`` (or a burst run that ends early) it stops; that is an
    error unless ``partial_ok`` (the steady run reports how far it got).
    """
    from gameserver.config import TaskServerConfig
    from gameserver.taskserver import TaskServer

    server = TaskServer(settings, registry, config=TaskServerConfig(batch_size=batch), burst=burst)
    # as the gameserver console script does: what lives on stays out of full GC passes
    # (collect first, so the bench's scheduling garbage is not frozen with it)
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    task = asyncio.create_task(server.run())
    try:
        waiter = asyncio.create_task(server.started.wait())
        await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if server.started.is_set():
            recorder.ready_at = time.perf_counter()
        if task.done():
            task.result()  # a failed start: raise its error
        if ready is not None:
            ready.set()
        waiter = asyncio.create_task(recorder.done.wait())
        finished, _ = await asyncio.wait(
            [waiter, task], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        if task in finished:
            task.result()
        if on_done is not None:
            on_done()
        if recorder.handled < recorder.expected and not partial_ok:
            raise FatalError(
                f"the task server ran {recorder.handled:,} of {recorder.expected:,} events "
                f"in {time.perf_counter() - started:.0f} s"
            )
        return time.perf_counter() - started
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await task


def bench_registry(recorder: Recorder) -> Any:
    from common.queue.handlers import HandlerRegistry
    from gameserver import builtin

    registry = HandlerRegistry()
    builtin.register(registry)
    registry.register(BENCH_KIND, recorder.wrap(None), durable=False)
    return registry


@dataclass
class Rates:
    events: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.events / max(self.seconds, 1e-9)


def lateness_percentiles(values: Sequence[float]) -> dict[str, float]:
    from bench.report import percentiles

    return percentiles(values)
