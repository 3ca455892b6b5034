"""One clock for every tier: integer milliseconds since the Unix epoch.

Code asks a ``Clock`` for the time and sleeps through it, so tests use a
``ManualClock`` and fast-forward instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        """Return at ``deadline_ms`` or as soon as ``wake`` is set, whichever is first."""
        ...


async def _wait(event: asyncio.Event | None, timeout_s: float) -> None:
    if event is None:
        await asyncio.sleep(timeout_s)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        await _wait(wake, max(0.0, (deadline_ms - self.now_ms()) / 1000))


class ManualClock:
    """A clock that only moves when told to; sleepers wake when it passes their deadline."""

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
