"""The worker of one partition: claim a batch, run its handlers, ack, repeat; sleep when idle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import operator
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from common.clock import Wake
from common.queue import codec, durable
from common.queue.claims import ClaimLine
from common.queue.eventqueue import EventQueue, check_new_event
from common.queue.events import Claim, Event, NewEvent
from common.queue.gathered import GatheredRuns, Ran, RunAlone
from common.queue.handlers import HandlerRegistry, Registration
from common.queue.policy import RetryPolicy
from common.queue.sqlite_reader import SqliteReader
from common.queue.tx import Tx, WorldShape
from common.queue.work import Committed
from common.snapshot_versions import ScriptRunner
from db import events as pending
from db.engine import bound_engine, is_database_outage, is_transaction_conflict
from db.stock import Stocks
from gameserver.config import TaskServerConfig
from gameserver.metrics import QueueMetrics

log = logging.getLogger(__name__)
_is_durable = operator.attrgetter("durable")
_run_order = operator.attrgetter("due_ms", "priority", "id")
_due = operator.attrgetter("due_ms")
_ACK_BEFORE_SLEEP_MS = 50  # a longer sleep acks the last batch first instead of later
HOLD_WARN_MS = 5_000  # a partition holding events back this long says why in a warning
HOLD_WARN_EVERY_MS = 60_000  # ... and again this often while it lasts

_DEAD_NOW = RetryPolicy(max_attempts=1)  # unknown kinds: no point in retrying on this process


@dataclass(slots=True)
class _Outcome:
    """What running one batch left to do after the handlers' transactions committed."""

    failures: list[tuple[Event, str, RetryPolicy]] = field(default_factory=list)
    deferred: list[tuple[Event, int]] = field(default_factory=list)
    held: list[Event] = field(default_factory=list)  # not to run yet (``_in_order``)
    returned: list[Event] = field(default_factory=list)  # claimed ahead, put back unrun
    committed: Committed = field(default_factory=Committed)  # of the durable transactions
    follow_memory: list[NewEvent] = field(default_factory=list)
    players: set[int] = field(default_factory=set)  # touched by in-memory handlers
    redelivered: int = 0
    # a transaction of this batch scheduled events (indexed by this worker or, for a
    # gathered one, perhaps by another partition's): the claim's next due time is old
    scheduled: bool = False


# A partition whose events were held back claims again this much later.
HOLD_RETRY_MS = 100
PAUSE_RETRY_MS = 1_000  # a paused worker (``may_run``) asks again this often


@dataclass(slots=True)
class _Hold:
    """Why a batch's events were put back: the event they wait for."""

    reason: str  # "lookahead barrier" or "village order"
    waiting_for: int  # event id
    kind: str
    village_id: int
    due_ms: int


class DatabaseUnavailable(Exception):
    """Raised out of a batch when the database fails: the worker stops, its supervisor
    restarts it later, and the batch returns to *due* with no attempt counted."""


def is_unavailable(exc: BaseException) -> bool:
    """The database, Redis or the network failed, or the transaction lost a race (a
    deadlock), not a handler: no event is to blame, and no attempt is counted."""
    if isinstance(exc, TimeoutError):  # a handler's timeout is the handler's
        return False
    if isinstance(exc, OSError | DatabaseUnavailable | RedisConnectionError):
        return True
    return is_database_outage(exc) or is_transaction_conflict(exc)


def _transactional(reg: Registration, group: list[Event]) -> bool:
    """The group runs in a database transaction: its kind is durable, or it holds a
    durable event (a kind registered in-memory after its events were written)."""
    return reg.durable or True in map(_is_durable, group)


def _last_durable(events: list[Event]) -> int:
    """The index of the last durable event in ``events``; -1: none is."""
    flags = list(map(_is_durable, events))
    return len(flags) - 1 - flags[::-1].index(True) if True in flags else -1


def _failure_kind(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, TimeoutError) else "error"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "handler timed out"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class PartitionWorker:
    """Runs the events of one partition in order until ``stop()``.

    Loop: claim up to ``batch_size`` due events (one Lua call), run them in
    groups of consecutive same-kind events, then ack the batch (the ack rides
    on the next claim). While a backlog drains (full batches) the next claim
    is sent before the current batch runs, so Redis and Python work in
    parallel. When caught up the worker sleeps until the earliest due time or
    lease deadline, or until ``wake`` is set (an earlier event was scheduled);
    while events keep coming it claims at most every ``min_claim_interval_ms``,
    so a busy partition is claimed in batches rather than one ms at a time.
    """

    def __init__(
        self,
        queue: EventQueue,
        partition: int,
        registry: HandlerRegistry,
        *,
        sessions: async_sessionmaker[AsyncSession] | None,
        config: TaskServerConfig | None = None,
        metrics: QueueMetrics | None = None,
        lease_valid: Callable[[], bool] | None = None,
        burst: bool = False,
        world_speed: float = 1.0,
        stocks: Stocks | None = None,
        may_run: Callable[[], bool] | None = None,
        world: WorldShape | None = None,
        fast: ScriptRunner | None = None,
        gathered: GatheredRuns | None = None,
    ) -> None:
        self.queue = queue
        # the process's runner of durable groups gathered across partitions; None: each
        # group commits in a transaction of this worker's own
        self.gathered = gathered
        # a pipelined connection to the queue's Redis for the bumps and indexes after each
        # batch (``Committed.finish``); None: redis-py's client
        self.fast = fast
        self.world_speed = world_speed
        self.stocks = stocks  # the game's, for its handlers (``Tx.stocks``)
        self.world = world  # the map and tick shape, for places founded by handlers
        self.partition = partition
        self.registry = registry
        self.sessions = sessions
        self.config = config or TaskServerConfig()
        self.metrics = metrics or QueueMetrics()
        self.lease_valid = lease_valid or (lambda: True)
        self.may_run = may_run or (lambda: True)  # False: claim nothing for now (clock skew)
        self.paused = False
        self.burst = burst
        self.wake = Wake()  # news of an earlier event; ends a sleep without a timeout's raise
        self.wake_before = math.inf  # while sleeping: news of an event due before this wakes us
        self.drained = asyncio.Event()  # burst mode: nothing due is left
        self._stopping = False
        self._held: set[bytes] = set()  # tokens of our in-flight batches, renewed periodically
        self._holding = False  # the last batch held events back (``_in_order``)
        self._returned = False  # the last batch put events claimed ahead back unrun
        self._hold_since: int | None = None  # clock ms the current run of holds began
        self._hold_warned = 0  # clock ms of the last warning about it
        label = str(partition)
        self._claimed = self.metrics.claimed.labels(label)
        self._acked = self.metrics.acked.labels(label)
        self._retried = self.metrics.retried.labels(label)
        self._dead = self.metrics.dead.labels(label)
        self._redelivered = self.metrics.redelivered.labels(label)
        self._held_back = self.metrics.held_back.labels(label)
        self._latency: dict[str, Any] = {}
        self._transaction_counters: dict[str, tuple[Any, Any]] = {}
        self._lateness = self.metrics.lateness
        self._may_run_at: Callable[[Event], int] = _due  # the batch in hand's (``_run_batch``)
        # on SQLite the order check of each batch reads without aiosqlite's thread
        self._reader = SqliteReader.for_sessions(sessions)
        self._engine = bound_engine(sessions)

    def _connect(self) -> AbstractAsyncContextManager[AsyncSession | AsyncConnection]:
        """A connection for reads outside a transaction: the engine's, or (sessions bound
        otherwise) a session."""
        assert self.sessions is not None
        return self._engine.connect() if self._engine is not None else self.sessions()

    def stop(self) -> None:
        """Finish the batch in hand, hand back a prefetched one, and return from ``run``."""
        self._stopping = True
        self.wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def run(self) -> None:
        done = asyncio.Event()
        renewer = asyncio.create_task(self._renew_loop(done), name=f"renew-{self.partition}")
        try:
            await self._loop()
        finally:
            done.set()  # the renewer wakes from its sleep and returns
            await renewer

    # --- the loop -----------------------------------------------------------

    async def _loop(self) -> None:
        q, cfg, p = self.queue, self.config, self.partition
        ahead = 0 if self.burst else cfg.claim_ahead_ms
        line = ClaimLine(q, p, cfg.batch_size, cfg.claim_lease_ms, ahead)
        if self._reader is not None:
            self._reader.warm()
        unacked: list[bytes] = []  # finished batches whose ack rides on the next claim
        fresh = False  # the claim in flight was sent after clearing ``wake``
        claimed_at = 0  # clock ms of the last fresh claim
        try:
            while not self._stopping and self.lease_valid():
                if not self.may_run():
                    # hand back what we claimed and wait: the events keep their place
                    self.paused = True
                    await self._wind_down(line, unacked)
                    unacked = []
                    self.wake.clear()
                    await q.clock.sleep_until(q.clock.now_ms() + PAUSE_RETRY_MS, self.wake)
                    continue
                self.paused = False
                if not line.pending:
                    self.wake.clear()  # before the claim: a wake-up after it is not lost
                    claimed_at = q.clock.now_ms()
                    await line.send(unacked)
                    unacked, fresh = [], True
                token, acked, reply = await line.receive()
                was_fresh, fresh = fresh, False
                self._held.difference_update(acked)
                n = reply[0]  # events claimed
                # (entries the claim sent to dead letters took places in the batch too)
                full = n + len(reply[4]) // 2 >= cfg.batch_size
                if n:
                    self._held.add(token)
                    if full and cfg.prefetch and not self._stopping:
                        # a backlog: Redis claims the next batch while this one runs
                        await line.send(unacked)
                        unacked = []
                claim = line.decode(token, reply)
                if claim.buried:
                    self._report_buried(claim.buried)
                stale = False  # the batch put events back: the claim's next due time is old
                if claim:
                    stale = await self._run_batch(claim, line.ready_times(claim, reply))
                    unacked.append(claim.token)
                    if self.wake_before != math.inf:  # it held events claimed ahead
                        # news of later events was ignored meanwhile: claim, do not sleep
                        self.wake_before = math.inf
                        stale = True
                if self._returned and line.pending:
                    # events claimed ahead went back: a claim sent before they did holds
                    # events after them in the run order, so it goes back too
                    await self._wind_down(line, unacked)
                    unacked = []
                self._returned = False
                if self._holding:
                    # events wait at the barrier, in their order: run nothing after them (a
                    # prefetched batch goes back too) until the earliest pending event is done
                    self._holding = False
                    await self._wind_down(line, unacked)
                    unacked = []
                    await q.clock.sleep_until(q.clock.now_ms() + HOLD_RETRY_MS, self.wake)
                    continue
                if line.pending or full or stale or not was_fresh or (self.burst and n):
                    continue  # more to claim now (or a claim to repeat before sleeping)
                # caught up: sleep until the next due time or lease deadline
                now = q.clock.now_ms()
                if (
                    self.burst
                    and claim.next_deadline_ms is None
                    and (claim.next_due_ms is None or claim.next_due_ms > now)
                ):
                    self.drained.set()
                    return
                deadline = now + cfg.max_idle_ms
                for t in (
                    None if claim.next_due_ms is None else claim.next_due_ms - ahead,
                    claim.next_deadline_ms,
                ):
                    if t is not None and t < deadline:
                        deadline = t
                if n:  # events are flowing in: claim them in bigger, fewer batches
                    deadline = max(deadline, claimed_at + cfg.min_claim_interval_ms)
                if unacked and deadline - now > _ACK_BEFORE_SLEEP_MS:
                    await self._ack(unacked)
                    unacked = []
                self.wake_before = deadline
                try:
                    await q.clock.sleep_until(deadline, self.wake)
                finally:
                    self.wake_before = math.inf
        finally:
            try:
                await self._wind_down(line, unacked)
            except Exception:  # Redis is gone: the batches return when their lease expires
                log.exception("partition %d: could not hand back in-flight batches", p)
            finally:
                await line.close()
                if self._reader is not None:
                    self._reader.close()

    def _report_buried(self, buried: list[tuple[bytes, str]]) -> None:
        for member, reason in buried:
            log.error("partition %d: malformed entry %r: %s", self.partition, member, reason)
        self._dead.inc(len(buried))

    async def _ack(self, tokens: list[bytes]) -> None:
        for token in tokens:
            await self.queue.ack(self.partition, token)
            self._held.discard(token)

    async def _wind_down(self, line: ClaimLine, unacked: list[bytes]) -> None:
        """Hand back claimed batches that never ran, and ack the finished ones."""
        while line.pending:
            token, acked, reply = await line.receive()
            self._held.difference_update(acked)
            if reply[0]:
                await self.queue.release(self.partition, token)
        await self._ack(unacked)

    async def _renew_loop(self, done: asyncio.Event) -> None:
        """Extend our in-flight leases every ``renew_every_ms`` of real time (liveness)."""
        while True:
            try:
                async with asyncio.timeout(self.config.renew_every_ms / 1000):
                    await done.wait()
                return
            except TimeoutError:
                pass
            if self._held:
                try:
                    await self.queue.renew(
                        self.partition, list(self._held), self.config.claim_lease_ms
                    )
                except Exception:
                    log.exception("partition %d: renewing in-flight leases failed", self.partition)

    # --- running a batch ----------------------------------------------------------

    async def _run_batch(self, claim: Claim, ready: dict[int, int] | None = None) -> bool:
        """Run a claimed batch; True if it put events back into this partition.

        ``ready``: event id -> when it may run, where that is not its due time (a retry
        claimed ahead, ``ClaimLine.ready_times``)."""
        q, p = self.queue, self.partition
        events = claim.events
        self._claimed.inc(len(events) + len(claim.bad))
        if claim.bad:
            for member, reason in claim.bad:
                log.error("partition %d: malformed entry %r: %s", p, member, reason)
            await self._mark_dead_members(claim.bad)
            self._dead.inc(await q.bury(p, claim.token, claim.bad))
        out = _Outcome()
        n = len(events)
        if any(e.attempts for e in events):  # a retry is claimed at its backoff, not its due
            events.sort(key=_run_order)
        i = 0
        clock = q.clock
        step = 0  # claimed ahead, the batch runs in steps: the next one not before this
        at = (lambda e: ready.get(e.id, e.due_ms)) if ready else _due  # when it may run
        self._may_run_at = at
        last = (max(map(at, events)) if ready else events[-1].due_ms) if events else 0
        if last > clock.now_ms():
            # while we hold events claimed ahead, news of an event due before our last
            # one means it may have to run first (``_until_due``)
            self.wake_before = last + 1
        # The order is checked right before the first events run, not when they are
        # claimed ahead: a check then would have to be made again once they are due.
        unchecked = self.sessions is not None
        last_durable: int | None = None  # found at the first wait, not rescanned at each
        while i < len(events):
            now = clock.now_ms()
            if at(events[i]) > now:  # claimed ahead (``claim_ahead_ms``): not due yet
                if not await self._until_due(events, i, out, max(at(events[i]), step)):
                    out.returned = events[i:]
                    break
                # durable events committed since the claim, which Redis may not know yet,
                # may come before the durable ones left
                if not unchecked and self.sessions is not None:
                    if last_durable is None:
                        last_durable = _last_durable(events)
                    unchecked = last_durable >= i
                continue
            if unchecked:
                unchecked = False
                events[i:], held = await self._in_order(events[i:])
                out.held.extend(held)
                last_durable = None  # the list changed
                continue  # look again: some may have been held back
            step = now + self.config.min_claim_interval_ms
            kind = events[i].kind
            j = i + 1
            while j < len(events) and events[j].kind == kind and at(events[j]) <= now:
                j += 1
            group = events if (i == 0 and j == len(events)) else events[i:j]
            i = j
            reg = self.registry.get(kind)
            if reg is None or not _transactional(reg, group):
                # a transaction's group is late until its transaction starts, which may
                # wait for other partitions' groups (``_call_durable``)
                self._lateness.observe_ms([now - at(event) for event in group])
            if reg is None:
                # the web tier and the task server load one game, which refuses to schedule
                # kinds it does not handle: this one was written by something else
                log.error(
                    "partition %d: %d events of kind %r, which no handler of this game "
                    "runs; sending them to the dead letters",
                    p, len(group), kind[:64],
                )  # fmt: skip
                self.metrics.handler_failures.labels("(unknown)", "unknown_kind").inc(len(group))
                for event in group:
                    out.failures.append((event, f"unknown event kind {kind!r}", _DEAD_NOW))
                continue
            await self._run_group(reg, group, out)
        await self._finish(claim, out, n)
        return bool(
            out.failures
            or out.deferred
            or out.held
            or out.returned
            or out.scheduled
            or out.follow_memory
        )

    async def _until_due(self, events: list[Event], i: int, out: _Outcome, until: int) -> bool:
        """Sleep until ``until``, when ``events[i]``, claimed ahead, may run (the batch runs
        in steps of ``min_claim_interval_ms``, not one wake-up per ms).

        False: put ``events[i:]`` back unrun instead, to be claimed again in order, since
        an event may now come before them: one scheduled since the claim (``wake``), or a
        follow-up of this batch; or the worker stops."""
        if self._stopping or self.wake.is_set() or out.follow_memory or out.scheduled:
            return False
        await self.queue.clock.sleep_until(until, self.wake)
        return not (self._stopping or self.wake.is_set() or not self.lease_valid())

    async def _in_order(self, events: list[Event]) -> tuple[list[Event], list[Event]]:
        """Split ``events`` (in run order) into (events to run now; events to put back).

        An event is put back, as it was, when something may still have to run before it:
        - *village order*: an earlier pending event of its village that the batch lacks
          (Redis has not indexed it yet, lost it, or holds it for a retry). It is indexed
          here at once (a no-op if Redis knows it), so it comes first next time.
        - *lookahead barrier* (with ``registry.set_lookahead``): it is due more than the
          lookahead after the earliest pending durable event of the world, whose
          follow-ups may still land in its village before it.
        """
        if self.sessions is None or not events:
            return events, []
        now = self.queue.clock.now_ms()
        lookahead = self.registry.lookahead_ms
        read = None if self._reader is None else self._reader.order(events, bool(lookahead))
        if read is not None:
            head, earlier = read
        else:
            # a Core connection, not an ORM session: plain reads need none of its state
            async with self._connect() as conn:
                head, earlier = await durable.order_reads(conn, events, bool(lookahead))
        if head is None and not earlier:
            self._note_hold(now, None, 0)
            return events, []
        limit = head.due_ms + lookahead if head is not None and lookahead else None
        first = {v: _run_order(e) for v, e in earlier.items()}
        run: list[Event] = []
        held: list[Event] = []
        why: _Hold | None = None
        for event in events:
            before = first.get(event.village_id)
            if before is not None and _run_order(event) > before:
                held.append(event)
                if why is None:
                    e = earlier[event.village_id]
                    why = _Hold("village order", e.id, e.kind, e.village_id, e.due_ms)
            elif limit is not None and event.due_ms > limit:
                held.append(event)
                if why is None and head is not None:
                    why = _Hold(
                        "lookahead barrier", head.id, head.kind, head.village_id, head.due_ms
                    )
            else:
                run.append(event)
        if earlier:
            await self.queue.index(earlier.values())
        self._note_hold(now, why, len(held))
        return run, held

    def _note_hold(self, now: int, why: _Hold | None, held: int) -> None:
        """Track how long this partition has been holding events back; warn when long."""
        if why is None:
            self._hold_since = None
            self.metrics.hold_seconds.labels(str(self.partition)).set(0)
            return
        if self._hold_since is None:
            self._hold_since = now
        waited = now - self._hold_since
        self.metrics.hold_seconds.labels(str(self.partition)).set(waited / 1000)
        if waited >= HOLD_WARN_MS and now - self._hold_warned >= HOLD_WARN_EVERY_MS:
            self._hold_warned = now
            self.metrics.long_holds.labels(why.reason).inc()
            log.warning(
                "partition %d: %d events held back for %.1f s (%s): waiting for event %d "
                "(%s, village %d, due %d) to run first",
                self.partition, held, waited / 1000, why.reason, why.waiting_for, why.kind,
                why.village_id, why.due_ms,
            )  # fmt: skip

    async def _run_group(self, reg: Registration, group: list[Event], out: _Outcome) -> None:
        if reg.max_batch is not None and len(group) > reg.max_batch:
            for i in range(0, len(group), reg.max_batch):
                await self._run_group(reg, group[i : i + reg.max_batch], out)
            return
        transactional = _transactional(reg, group)
        try:
            if transactional:
                await self._call_durable(reg, group, out)
            else:
                await self._call_memory(reg, group, out)
        except Exception as exc:
            if transactional and is_unavailable(exc):
                raise DatabaseUnavailable(f"database unavailable: {_describe(exc)}") from exc
            self.metrics.handler_failures.labels(reg.kind, _failure_kind(exc)).inc()
            if len(group) == 1:
                log.warning(
                    "partition %d: %s event %d failed: %s",
                    self.partition, reg.kind, group[0].id, _describe(exc),
                    exc_info=not isinstance(exc, TimeoutError),
                )  # fmt: skip
                out.failures.append((group[0], _describe(exc), reg.retry))
                return
            log.info(
                "partition %d: a call of %s with %d events failed (%s); isolating",
                self.partition, reg.kind, len(group), _describe(exc),
            )  # fmt: skip
            if transactional:
                # the call rolled back: halve the batch until the bad events stand alone
                # (a bad event costs ~2 log2(n) calls; a batch too slow for the timeout
                # runs in halves)
                half = len(group) // 2
                await self._run_group(reg, group[:half], out)
                await self._run_group(reg, group[half:], out)
            else:
                # no rollback here: run each event once more, on its own
                for event in group:
                    await self._run_group(reg, [event], out)

    def _counted(self, kind: str) -> tuple[Any, Any]:
        """The transactions and transaction events counters of ``kind`` (looked up once)."""
        found = self._transaction_counters.get(kind)
        if found is None:
            m = self.metrics
            found = (m.transactions.labels(kind), m.transaction_events.labels(kind))
            self._transaction_counters[kind] = found
        return found

    def _observe(self, kind: str, started: float) -> None:
        child = self._latency.get(kind)
        if child is None:
            child = self._latency[kind] = self.metrics.latency.labels(kind)
        child.observe(time.perf_counter() - started)

    async def _call_memory(self, reg: Registration, group: list[Event], out: _Outcome) -> None:
        tx = self._tx(None, self.queue.clock.now_ms())
        started = time.perf_counter()
        async with asyncio.timeout(reg.timeout_s):
            await reg.handler(tx, group)
        self._observe(reg.kind, started)
        if tx.kept_writes or tx.kept_guards:
            raise RuntimeError("a handler registered with durable=False has no rows to write")
        for new in tx.events:  # a bad follow-up fails this call, not the worker
            check_new_event(new, tx.now_ms, tx.now_ms + self.queue.max_ahead_ms)
        out.follow_memory.extend(tx.events)
        out.players.update(tx.touched)
        out.committed.alerts.extend(tx.alerts)

    async def _call_durable(self, reg: Registration, group: list[Event], out: _Outcome) -> None:
        if self.sessions is None:
            raise RuntimeError("durable events need a database; this worker has none")
        if self.gathered is None:
            ran = await self._transaction(reg, group)
        else:
            try:
                ran = await self.gathered.run(reg, group, self._transaction)
            except RunAlone:
                ran = await self._transaction(reg, group)
        # committed: the effects and the processed records are durable now
        at = self._may_run_at
        self._lateness.observe_ms([ran.started_ms - at(event) for event in group])
        out.redelivered += len(group) - len(ran.run) - len(ran.deferred)
        out.deferred.extend(ran.deferred)
        if ran.tx is not None:
            out.committed.add(ran.tx, ran.follow)
        out.scheduled = out.scheduled or ran.scheduled

    async def _transaction(self, reg: Registration, group: list[Event]) -> Ran:
        """Run ``group``'s handler in one transaction (``group`` may hold other partitions'
        groups too: ``common.queue.gathered``)."""
        assert self.sessions is not None
        now = self.queue.clock.now_ms()
        async with self.sessions() as session, session.begin():
            run, deferred = await durable.take_events(session, group, now)
            tx = self._tx(session, now)
            follow: list[Event] = []
            if run:
                started = time.perf_counter()
                async with asyncio.timeout(reg.timeout_s):
                    await reg.handler(tx, run)
                self._observe(reg.kind, started)
                await tx.write_kept()
                if tx.events:
                    follow = await durable.add_durable_events(
                        session, tx.events, clock=self.queue.clock, ids=self.queue.ids
                    )
        transactions, events = self._counted(reg.kind)
        transactions.inc()
        events.inc(len(group))
        return Ran(run, deferred, tx, follow, scheduled=bool(follow), started_ms=now)

    def _tx(self, session: AsyncSession | None, now_ms: int) -> Tx:
        return Tx(
            session,
            now_ms,
            self.world_speed,
            self.queue.ids,
            kinds=self.registry,
            stocks=self.stocks,
            world=self.world,
        )

    async def _record_failures(self, failures: list[tuple[Event, str, RetryPolicy]]) -> None:
        """Write failed and dead durable events to their rows before Redis moves them, so the
        database never says an event holds more back than it does (``db.events``)."""
        now = self.queue.clock.now_ms()
        failed: list[tuple[int, int, str]] = []
        dead: list[tuple[int, int, str]] = []
        for event, error, policy in failures:
            attempts = event.attempts + 1
            if policy.gives_up(attempts):
                log.warning(
                    "partition %d: event %d (%s, village %d, due %d) goes to the dead letters "
                    "after %d attempts: %s",
                    self.partition, event.id, event.kind[:64], event.village_id, event.due_ms,
                    attempts, error,
                )  # fmt: skip
                if event.durable:
                    dead.append((event.id, attempts, error))
            elif event.durable:
                failed.append((event.id, attempts, error))
        if self.sessions is not None and (failed or dead):
            async with self.sessions() as session, session.begin():
                await pending.mark_failed(session, failed)
                await pending.mark_dead(session, dead, now)

    async def _mark_dead_members(self, bad: list[tuple[bytes, str]]) -> None:
        """Undecodable entries that carry the id of a durable event: its row is dead too."""
        rows: list[tuple[int, int, str]] = []
        for member, reason in bad:
            with contextlib.suppress(ValueError):
                rows.append((codec.split_member(member)[1], 0, reason))
        if self.sessions is not None and rows:
            async with self.sessions() as session, session.begin():
                await pending.mark_dead(session, rows, self.queue.clock.now_ms())

    async def _finish(self, claim: Claim, out: _Outcome, n: int) -> None:
        q, p, token = self.queue, self.partition, claim.token
        failed = len(out.failures)
        if out.failures:
            await self._record_failures(out.failures)
            by_policy: dict[RetryPolicy, list[tuple[Event, str]]] = {}
            for event, error, policy in out.failures:
                by_policy.setdefault(policy, []).append((event, error))
            for policy, failures in by_policy.items():
                retried, dead = await q.retry(p, token, failures, policy)
                self._retried.inc(retried)
                self._dead.inc(dead)
        if out.deferred:
            await q.defer(p, token, out.deferred)
        if out.held:
            await q.hold(p, token, out.held)
            self._held_back.inc(len(out.held))
            self._holding = True
        if out.returned:
            await q.hold(p, token, out.returned)
            self._returned = True
        if out.redelivered:
            self._redelivered.inc(out.redelivered)
        self._acked.inc(n - failed - len(out.deferred) - len(out.held) - len(out.returned))
        if out.follow_memory:
            await q.schedule_many(out.follow_memory)
        out.committed.players.update(out.players)
        if out.committed:
            await out.committed.finish(q, q.clock.now_ms(), f"partition {p}", self.fast)
