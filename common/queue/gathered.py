"""Durable event groups of one kind from several partitions' workers, run together.

Each partition's worker runs its durable events in transactions of its own: claim,
check the order, then one transaction per group of consecutive same-kind events (take
their rows, call the handler, write what it kept and scheduled, commit). Under a
flow of events spread over many partitions a claim holds one or two, so every event
pays a whole transaction (BEGIN, the take, the handler's statements, COMMIT) alone.

``GatheredRuns`` is one per task server: a worker hands over its group, and groups of
one kind that wait together (``common.batch_slots``: handed over within ``gather_ms`` of
the last take, or while the runners are busy) run as ONE group in one transaction: the
handler is called once with all their events (handlers are set-based over a batch
already, ``common.queue.handlers``), and each worker gets back what concerns its own
events. A take runs every kind that waits, each in calls no larger than its handler's
``max_batch``, side by side; a whole call's worth waiting (a backlog) is taken at once.
A group's events stay in its partition's order; groups of different partitions hold
different villages' events, whose order against each other a partition never promised.

Each group keeps its own outcome: the rows a gathered transaction took are exactly the
ones its groups' own transactions would have taken. When the gathered call fails (a
handler raised or timed out, a deadlock, the database went away), nothing of it
committed, and every group runs again alone through its worker's own path
(``RunAlone``), where the existing rules isolate a bad event and count attempts: a
bad event never costs another partition's events more than one extra call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from common.batch_slots import BatchSlots
from common.clock import SYSTEM_CLOCK, Clock
from common.queue.events import Event
from common.queue.handlers import Registration
from common.queue.tx import Tx

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Ran:
    """What one durable transaction did with a group of events."""

    run: list[Event]  # the events whose handler ran: their rows were taken by it
    deferred: list[tuple[Event, int]]  # rescheduled after Redis handed them out: (event, due)
    tx: Tx | None  # the transaction's object, for what follows its commit; None: another
    # group of the gathered transaction carries it
    follow: list[Event] = field(default_factory=list)  # the durable events it scheduled
    scheduled: bool = False  # it scheduled events (carried by this group or another)
    started_ms: int = 0  # when the transaction started (clock ms): its events' handler ran


Call = Callable[[Registration, list[Event]], Awaitable[Ran]]


class RunAlone(Exception):
    """The gathered call failed and committed nothing: run your group on your own."""


@dataclass(slots=True)
class _Handed:
    reg: Registration
    group: list[Event]
    call: Call  # the worker's own transaction, which runs the gathered group too
    done: asyncio.Future[Ran]


class GatheredRuns:
    """Runs the groups handed over by this process's workers, gathering those that wait."""

    def __init__(
        self,
        *,
        slots: int,
        max_batch: int,
        gather_ms: int = 0,
        clock: Clock = SYSTEM_CLOCK,  # paces the batches in real time
    ) -> None:
        if slots < 1 or max_batch < 1:
            raise ValueError("slots and max_batch must be >= 1")
        self.max_batch = max_batch
        self.waiting: dict[str, list[_Handed]] = {}
        self._slots = BatchSlots(
            slots, self._run, lambda: bool(self.waiting), gather_ms, clock, full=self._full
        )
        self.gathered_calls = 0  # calls that ran more than one group (tests read it)

    async def run(self, reg: Registration, group: list[Event], call: Call) -> Ran:
        """Run ``group`` with others of its kind that wait, or alone; raises what its
        transaction raised when it ran alone, ``RunAlone`` when a gathered call failed."""
        done: asyncio.Future[Ran] = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(reg.kind, []).append(_Handed(reg, group, call, done))
        self._slots.wake()
        return await done

    def _cap(self, reg: Registration) -> int:
        """The most events of one call of ``reg``'s handler."""
        return min(self.max_batch, reg.max_batch or self.max_batch)

    def _full(self) -> bool:
        """A whole call's worth of some kind waits (a backlog): no reason to wait longer."""
        return any(
            sum(len(handed.group) for handed in groups) >= self._cap(groups[0].reg)
            for groups in self.waiting.values()
        )

    async def _run(self) -> None:
        # Everything that waits is taken when the runner runs (groups handed over in the
        # same loop iteration join it): every kind, in as many calls as its handler's
        # ``max_batch`` needs, the calls running side by side as their groups' own would.
        # Anything left for the next runner would wait another window.
        batches = [batch for kind in list(self.waiting) for batch in self._take(kind)]
        try:
            await asyncio.gather(*(self._one(batch) for batch in batches))
        except asyncio.CancelledError:
            for batch in batches:
                for handed in batch:
                    handed.done.cancel()
            raise

    async def _one(self, batch: list[_Handed]) -> None:
        if len(batch) == 1:
            await self._alone(batch[0])
        else:
            await self._together(batch)

    def _take(self, kind: str) -> list[list[_Handed]]:
        """The waiting groups of ``kind`` in calls of at most ``max_batch`` events."""
        waiting = self.waiting.pop(kind)
        cap = self._cap(waiting[0].reg)
        batches: list[list[_Handed]] = []
        size = 0
        for handed in waiting:
            if handed.done.done():  # its worker was cancelled
                continue
            if not batches or size + len(handed.group) > cap:
                batches.append([])
                size = 0
            batches[-1].append(handed)
            size += len(handed.group)
        return batches

    @staticmethod
    async def _alone(handed: _Handed) -> None:
        try:
            ran = await handed.call(handed.reg, handed.group)
        except Exception as exc:
            if not handed.done.done():
                handed.done.set_exception(exc)
        else:
            if not handed.done.done():
                handed.done.set_result(ran)

    async def _together(self, batch: list[_Handed]) -> None:
        first = batch[0]
        owner: dict[int, int] = {}  # id(event) -> its group's index in the batch
        for i, handed in enumerate(batch):
            for event in handed.group:
                owner[id(event)] = i
        try:
            ran = await first.call(first.reg, [e for handed in batch for e in handed.group])
        except Exception as exc:
            log.info(
                "a gathered call of %s with %d groups failed (%s); each runs alone",
                first.reg.kind, len(batch), type(exc).__name__,
            )  # fmt: skip
            for handed in batch:
                if not handed.done.done():
                    handed.done.set_exception(RunAlone())
            return
        self.gathered_calls += 1
        parts = [
            Ran([], [], None, scheduled=ran.scheduled, started_ms=ran.started_ms) for _ in batch
        ]
        # one worker carries what follows the commit (its bumps, alerts, the new events'
        # index): the first still waiting, since a cancelled one would drop it
        carrier = next((i for i, h in enumerate(batch) if not h.done.done()), 0)
        parts[carrier].tx, parts[carrier].follow = ran.tx, ran.follow
        for event in ran.run:
            parts[owner[id(event)]].run.append(event)
        for event, due in ran.deferred:
            parts[owner[id(event)]].deferred.append((event, due))
        for handed, part in zip(batch, parts, strict=True):
            if not handed.done.done():
                handed.done.set_result(part)

    async def close(self) -> None:
        """Wait for the runners in flight (their workers stopped first)."""
        if self._slots.tasks:
            await asyncio.gather(*self._slots.tasks, return_exceptions=True)
