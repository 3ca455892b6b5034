"""At most ``slots`` batch runners at once: the shape every read batcher shares
(``webfront.snapshot_reads``, ``db.shared_reads``).

A batcher queues its work, then calls ``wake()``: while fewer than ``slots`` runners are in
flight, one more starts. A runner takes its batch when it runs, so work queued in the same
loop iteration joins it; as it ends, the next starts while ``pending()`` says work waits.

With ``gather_ms``, a runner takes its batch no sooner than ``gather_ms`` after the last
one was taken: work that comes within that time of a batch waits, and the next batch takes
all of it together, while work in a quiet process (no batch taken for ``gather_ms``) is
taken at once. A batch's fixed cost (a statement's round trip and executor start) is then
paid at most once per ``gather_ms`` however fast the work comes: the busier the process,
the larger its batches and the cheaper each piece. While one runner gathers, no other
starts: it takes whatever waits. With ``full`` (a whole batch waits), the runner stops
gathering at once: waiting longer would only make the next batch wait too, as in a
backlog, where the window would cap the batches a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from common.clock import SYSTEM_CLOCK, Clock, Wake


class BatchSlots:
    def __init__(
        self,
        slots: int,
        run: Callable[[], Awaitable[None]],
        pending: Callable[[], bool],
        gather_ms: int = 0,
        clock: Clock = SYSTEM_CLOCK,  # paces the batches in real time, not a game's time
        full: Callable[[], bool] | None = None,
    ) -> None:
        if gather_ms < 0:
            raise ValueError("gather_ms must be >= 0")
        self.slots = slots
        self._run = run
        self._pending = pending
        self.gather_ms = gather_ms
        self.clock = clock
        self.running = 0  # runners in flight (or about to start)
        self.gathering = False  # a runner waits to take the next batch: it takes all there is
        self.next_batch_ms = 0  # the next batch is taken no sooner than this
        self.tasks: set[asyncio.Task[None]] = set()
        self._full = full or (lambda: False)
        self._cut = Wake()  # ends the gathering runner's wait: a whole batch waits

    def wake(self) -> None:
        if self.gathering and self._full():
            self._cut.set()
        if self.running < self.slots and not self.gathering:
            self.running += 1
            task = asyncio.create_task(self._one())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _one(self) -> None:
        try:
            if not self.gather_ms or await self._gather():
                await self._run()
        finally:
            self.running -= 1
            if self._pending():
                self.wake()

    async def _gather(self) -> bool:
        """Wait until the next batch may be taken, and set when the one after it may; False
        when nothing waits (a runner started beside another that took it all): the window
        stays unused, so the next work in a quiet process is still taken at once."""
        if self.clock.now_ms() < self.next_batch_ms and self._pending() and not self._full():
            self.gathering = True
            self._cut.clear()
            try:
                await self.clock.sleep_until(self.next_batch_ms, self._cut)
            finally:
                self.gathering = False
        if not self._pending():
            return False
        self.next_batch_ms = self.clock.now_ms() + self.gather_ms
        return True
