"""Background loops that must not die quietly: restarted after a crash, with the reason logged.

A loop that returns ends for good (it was asked to stop); one that raises is
logged with its traceback and started again after a pause that doubles up to
``max_backoff_s`` while it keeps failing (and starts over once it ran for a
minute). Cancelling the task stops it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("supervise")

HEALTHY_AFTER_S = 60.0  # a loop that ran this long before failing starts its backoff over


async def supervised(
    name: str,
    loop: Callable[[], Awaitable[None]],
    *,
    backoff_s: float = 1.0,
    max_backoff_s: float = 30.0,
    on_crash: Callable[[str], None] | None = None,
) -> None:
    """Run ``loop()`` until it returns, restarting it whenever it raises."""
    failures = 0
    while True:
        started = time.monotonic()
        try:
            await loop()
            return
        except Exception:
            if time.monotonic() - started > HEALTHY_AFTER_S:
                failures = 0
            failures += 1
            delay = min(backoff_s * 2 ** (failures - 1), max_backoff_s)
            log.exception("%s crashed; restarting it in %.1f s", name, delay)
            if on_crash is not None:
                on_crash(name)
        await asyncio.sleep(delay)


def start(
    name: str,
    loop: Callable[[], Awaitable[None]],
    on_crash: Callable[[str], None] | None = None,
) -> asyncio.Task[None]:
    """``supervised`` as a named task."""
    return asyncio.create_task(supervised(name, loop, on_crash=on_crash), name=name)
