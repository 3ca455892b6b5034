"""At most ``slots`` batch runners at once: the shape every read batcher shares
(``webfront.snapshot_reads``, ``db.shared_reads``).

A batcher queues its work, then calls ``wake()``: while fewer than ``slots`` runners are in
flight, one more starts. A runner takes its batch when it runs, so work queued in the same
loop iteration joins it; as it ends, the next starts while ``pending()`` says work waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class BatchSlots:
    def __init__(
        self, slots: int, run: Callable[[], Awaitable[None]], pending: Callable[[], bool]
    ) -> None:
        self.slots = slots
        self._run = run
        self._pending = pending
        self.running = 0  # runners in flight (or about to start)
        self.tasks: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        if self.running < self.slots:
            self.running += 1
            task = asyncio.create_task(self._one())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _one(self) -> None:
        try:
            await self._run()
        finally:
            self.running -= 1
            if self._pending():
                self.wake()
