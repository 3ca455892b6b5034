"""Waiting in tests: on a condition with a deadline, never for a fixed time.

A test that sleeps, then asserts, passes or fails by how busy the machine is. These
poll a condition in short steps and fail, saying what they waited for, at a deadline
far beyond any normal wait.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

STEP_S = 0.01  # between two looks at the condition


async def wait_for(
    check: Callable[[], bool | Awaitable[bool]], what: str, timeout_s: float = 20.0
) -> None:
    """Return once ``check()`` (plain or async) is true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(STEP_S)


def wait_for_blocking(check: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    """``wait_for`` for a test without an event loop (processes, threads)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        time.sleep(STEP_S)
