"""``SystemClock.sleep_until``: a wake-up ends the sleep, and a cancellation is never lost; for
a plain ``asyncio.Event`` and for a ``Wake`` (the workers' own, which ends at a deadline without
a timeout's raise)."""

from __future__ import annotations

import asyncio

import pytest

from common.clock import SYSTEM_CLOCK, Wake

FAR_MS = 3_600_000  # an hour: these tests end by a wake-up or a cancellation, not the deadline

both_kinds = pytest.mark.parametrize("kind", [asyncio.Event, Wake])


@both_kinds
async def test_a_wake_up_ends_the_sleep(kind: type[asyncio.Event]) -> None:
    wake = kind()
    sleeper = asyncio.create_task(SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() + FAR_MS, wake))
    await asyncio.sleep(0)  # the sleeper is waiting now
    wake.set()
    await sleeper


@both_kinds
async def test_a_wake_up_already_set_returns_at_once(kind: type[asyncio.Event]) -> None:
    wake = kind()
    wake.set()
    await SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() + FAR_MS, wake)


@both_kinds
async def test_a_cancellation_beside_a_wake_up_is_not_lost(kind: type[asyncio.Event]) -> None:
    """A worker stopped (cancelled) just as news wakes it must stop, not sleep on."""
    wake = kind()
    sleeper = asyncio.create_task(SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() + FAR_MS, wake))
    await asyncio.sleep(0)
    wake.set()  # the wait completes ...
    sleeper.cancel()  # ... and the cancellation arrives in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await sleeper


@both_kinds
async def test_the_deadline_ends_the_sleep_and_sets_nothing(kind: type[asyncio.Event]) -> None:
    wake = kind()
    await SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms(), wake)  # due now: the timer ends it
    await SYSTEM_CLOCK.sleep_until(SYSTEM_CLOCK.now_ms() - 5, wake)  # past: ends at once
    assert not wake.is_set()


async def test_a_wake_wakes_every_sleeper_and_forgets_those_that_ended() -> None:
    """Sleeps that ended (by deadline, wake-up or cancellation) leave nothing behind that a
    later ``set`` would touch, and a ``set`` wakes every sleeper and every plain waiter."""
    wake = Wake()
    for _ in range(3):
        await wake.sleep(0)
    cancelled = asyncio.create_task(wake.sleep(3600))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    sleepers = [asyncio.create_task(wake.sleep(3600)) for _ in range(2)]
    waiter = asyncio.create_task(wake.wait())
    await asyncio.sleep(0)
    wake.set()
    await asyncio.gather(*sleepers, waiter)
    assert wake._sleepers == []
    wake.clear()
    again = asyncio.create_task(wake.sleep(3600))
    await asyncio.sleep(0)
    assert not again.done()  # cleared: it sleeps again
    wake.set()
    await again
