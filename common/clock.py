"""One clock for every tier: integer milliseconds since the Unix epoch.

Code asks a ``Clock`` for the time and sleeps through it, so tests use a
``ManualClock`` and fast-forward instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        """Return at ``deadline_ms`` or as soon as ``wake`` is set, whichever is first."""
        ...


class Wake(asyncio.Event):
    """An ``asyncio.Event`` whose waiter can also give up at a deadline without a timeout's
    cancellation: a task-server worker sleeps until the next events are due a few thousand
    times a second under a steady flow, and ``asyncio.timeout`` ends each such sleep by
    raising into the sleeper, which costs more than the rest of the sleep."""

    def __init__(self) -> None:
        super().__init__()
        self._sleepers: list[asyncio.Future[None]] = []

    def set(self) -> None:
        super().set()
        for sleeper in self._sleepers:
            if not sleeper.done():
                sleeper.set_result(None)

    async def sleep(self, timeout_s: float) -> None:
        """Return after ``timeout_s`` or as soon as the event is set."""
        if self.is_set():
            return
        loop = asyncio.get_running_loop()
        sleeper: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(timeout_s, _end_sleep, sleeper)
        self._sleepers.append(sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            self._sleepers.remove(sleeper)


def _end_sleep(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)


async def _wait(event: asyncio.Event | None, timeout_s: float) -> None:
    if event is None:
        await asyncio.sleep(timeout_s)
        return
    if isinstance(event, Wake):
        await event.sleep(timeout_s)
        return
    if event.is_set():
        return
    # asyncio.timeout, not wait_for: no task per sleep (the workers sleep thousands of times
    # a second under a steady flow), and a cancellation is never lost to a wake-up that
    # lands at the same moment, as it can be with Python 3.11's wait_for
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        await _wait(wake, max(0.0, (deadline_ms - self.now_ms()) / 1000))


class ManualClock:
    """A clock that only moves when told to; sleepers wake when it passes their deadline.

    It is ``simulated``: far from real time on purpose, so no skew check applies."""

    simulated = True

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._moved: asyncio.Event | None = None  # made in the running loop, on first sleep

    def now_ms(self) -> int:
        return self._now

    async def advance(self, ms: int) -> None:
        await self.set(self._now + ms)

    async def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("a clock never goes back")
        self._now = now_ms
        moved, self._moved = self._moved, None
        if moved is not None:
            moved.set()  # every sleeper re-checks its deadline

    def slept_on(self) -> bool:
        """Whether a sleeper has looked at the time since the clock last moved and sleeps on:
        a test waits for it before asserting that nothing more was due."""
        return self._moved is not None

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        while self._now < deadline_ms and not (wake and wake.is_set()):
            if self._moved is None:
                self._moved = asyncio.Event()
            waits = [asyncio.ensure_future(self._moved.wait())]
            if wake is not None:
                waits.append(asyncio.ensure_future(wake.wait()))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()


SYSTEM_CLOCK = SystemClock()


class OffsetClock:
    """``base`` off by ``offset_ms`` (a host whose clock is wrong; tests inject skew)."""

    def __init__(self, base: Clock, offset_ms: int) -> None:
        self.base = base
        self.offset_ms = offset_ms
        self.simulated = is_simulated(base)

    def now_ms(self) -> int:
        return self.base.now_ms() + self.offset_ms

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        await self.base.sleep_until(deadline_ms - self.offset_ms, wake)


# --- clock skew: this process's clock against the Redis server's ----------------------------


def is_simulated(clock: Clock) -> bool:
    """A test's clock that is not meant to follow real time (no skew check)."""
    return bool(getattr(clock, "simulated", False))


SKEW_CHECK_EVERY_S = 60.0  # a process compares its clock with Redis TIME this often
SKEW_RECHECK_S = 5.0  # ... and this often while its clock is too far off to run handlers


class ClockCheck:
    """Compares a process's clock with Redis ``TIME`` (``check``; ``run``: at once and every
    ``every_s``).

    Game time comes from each host's clock, while leases and one-per-world jobs use the
    Redis server's: a host that is off settles stocks and runs events at the wrong time.
    The offset (local minus Redis, half the round trip's error) is exported as the gauge
    ``webgame_clock_offset_seconds``. Past ``warn_ms`` each check logs a WARNING; past
    ``max_ms`` ``ok`` turns False (an ERROR, and ``webgame_clock_skew_refusing`` is 1):
    the task server then runs no handler, no tick and no job, and hands its partitions,
    shards and jobs back to the healthy servers, until a check finds the clock back.
    A failed check (Redis down) keeps the last verdict.
    """

    def __init__(
        self,
        redis: Any,
        clock: Clock,
        *,
        warn_ms: int,
        max_ms: int,
        every_s: float = SKEW_CHECK_EVERY_S,
        registry: Any = None,
        what: str = "this process",
    ) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        self.redis = redis
        self.clock = clock
        self.warn_ms = warn_ms
        self.max_ms = max_ms
        self.every_s = every_s
        self.what = what
        self.offset_ms: int | None = None  # None: never measured
        self.ok = True
        r = registry if registry is not None else CollectorRegistry()
        self._offset = Gauge(
            "webgame_clock_offset_seconds",
            "This process's clock minus the Redis server's (TIME)",
            registry=r,
        )
        self._refusing = Gauge(
            "webgame_clock_skew_refusing",
            "1 while the clock is too far off to run handlers and the tick",
            registry=r,
        )
        self._stop = asyncio.Event()

    async def check(self) -> int:
        """Measure the offset once, update the verdict and the metrics; returns the offset."""
        before = self.clock.now_ms()
        seconds, micros = await self.redis.time()
        after = self.clock.now_ms()
        offset = (before + after) // 2 - (int(seconds) * 1000 + int(micros) // 1000)
        self.offset_ms = offset
        self._offset.set(offset / 1000)
        off = abs(offset)
        if off > self.max_ms:
            log.error(
                "%s: the clock is %+d ms off the Redis server's (limit %d ms): running no "
                "handler and no tick until it is back (fix the host's time sync)",
                self.what, offset, self.max_ms,
            )  # fmt: skip
            self.ok = False
        else:
            if not self.ok:
                log.warning("%s: the clock is back within %d ms of Redis (%+d ms): running "
                            "again", self.what, self.max_ms, offset)  # fmt: skip
            elif off > self.warn_ms:
                log.warning(
                    "%s: the clock is %+d ms off the Redis server's (warning past %d ms, "
                    "handlers stop past %d ms)", self.what, offset, self.warn_ms, self.max_ms,
                )  # fmt: skip
            self.ok = True
        self._refusing.set(0 if self.ok else 1)
        return offset

    async def run(self) -> None:
        """Check every ``every_s`` until ``stop()`` (the caller checks once at start); a failed
        check is logged and retried."""
        while True:
            # while refusing, look again sooner: the host may have fixed its time
            every_s = self.every_s if self.ok else min(self.every_s, SKEW_RECHECK_S)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(every_s):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            await self.check_or_warn()

    async def check_or_warn(self) -> None:
        """``check``, with a failure (Redis unreachable) logged instead of raised."""
        try:
            await self.check()
        except Exception as exc:
            log.warning("%s: comparing the clock with Redis failed: %s", self.what, exc)

    def stop(self) -> None:
        self._stop.set()
