"""``SystemClock.sleep_until``: a wake-up ends the sleep, and a cancellation is never lost."""

from __future__ import annotations

import asyncio

import pytest

from common.clock import SYSTEM_CLOCK

FAR_MS = 3_600_000  # an hour: these tests end by a wake-up or a cancellation, not the deadline


async def test_a_wake_up_ends_the_sleep() -> None:
    wake = asyncio.Event()
    sleeper = asyncio.create_task(SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() + FAR_MS, wake))
    await asyncio.sleep(0)  # the sleeper is waiting now
    wake.set()
    await sleeper


async def test_a_wake_up_already_set_returns_at_once() -> None:
    wake = asyncio.Event()
    wake.set()
    await SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() + FAR_MS, wake)


async def test_a_cancellation_beside_a_wake_up_is_not_lost() -> None:
    """A worker stopped (cancelled) just as news wakes it must stop, not sleep on."""
    wake = asyncio.Event()
    sleeper = asyncio.create_task(SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() + FAR_MS, wake))
    await asyncio.sleep(0)
    wake.set()  # the wait completes ...
    sleeper.cancel()  # ... and the cancellation arrives in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await sleeper
