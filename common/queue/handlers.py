"""Event handlers: registered per kind, called with a batch of events of that kind and the
batch's transaction (``common.queue.tx.Tx``, the same object a command gets)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from common.queue.constants import HANDLER_TIMEOUT_S, KIND_MAX_LEN
from common.queue.events import Event
from common.queue.policy import RetryPolicy
from common.queue.tx import Tx

if TYPE_CHECKING:
    pass


class Handler(Protocol):
    """``async def handler(tx, events)``: run a batch of consecutive events of one kind.

    Prefer set-based DB statements over a loop of per-event queries: a batch
    can hold hundreds of events. A durable batch may hold the groups of several
    partitions (``common.queue.gathered``): each group in its partition's order,
    the groups' villages apart. Raising fails the batch; the worker then runs
    its events one by one so only the bad one is retried.
    """

    def __call__(self, tx: Tx, events: list[Event], /) -> Awaitable[None]: ...


class Job(Protocol):
    """``async def job(ctx)``: a game's periodic job (``HandlerRegistry.add_job``); ``ctx`` is
    a ``gameserver.jobs.JobContext`` (settings, Redis, DB sessions, clock)."""

    def __call__(self, ctx: Any, /) -> Awaitable[None]: ...


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    name: str
    func: Job
    seconds: float


@dataclass(frozen=True, slots=True)
class Registration:
    kind: str
    handler: Handler
    durable: bool
    timeout_s: float
    retry: RetryPolicy
    max_batch: int | None
    # undoes what the events' commands did when an operator drops them dead
    # (``common.queue.deadletters.drop``); None: a drop only deletes them
    compensate: Handler | None = None


class HandlerRegistry:
    """Maps event kinds to handlers."""

    def __init__(self) -> None:
        self._by_kind: dict[str, Registration] = {}
        self.lookahead_ms: int | None = None
        self.jobs: list[PeriodicJob] = []

    def set_lookahead(self, ms: int) -> None:
        """Keep causality across partitions: no durable event runs more than ``ms`` after
        the earliest pending one (its village's changes are held back instead).

        ``ms`` is the shortest delay between an event and a follow-up it schedules in
        another village (e.g. the fastest news of a battle reaching a neighbour). A
        follow-up is then never due before an event that already ran in its village, so
        a change is never applied after a later one, however late a partition runs
        (a killed or paused task server). A failing or dead event does not hold the
        others (``db.events``: the one definition of a stuck event).
        """
        if ms < 1:
            raise ValueError("a lookahead is >= 1 ms")
        self.lookahead_ms = ms

    def register(
        self,
        kind: str,
        handler: Handler,
        *,
        durable: bool = True,
        timeout_s: float = HANDLER_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        max_batch: int | None = None,
        compensate: Handler | None = None,
    ) -> None:
        """Run ``handler`` for events of ``kind``.

        ``durable=True``: the handler runs in a DB transaction (``ctx.session``)
        that deletes the events' ``scheduled_events`` rows and records them in
        ``processed_events``, so its effects happen exactly once.
        ``durable=False``: no transaction (in-memory work; at-least-once).
        A call running longer than ``timeout_s`` is cancelled and counts as a failure.
        ``max_batch`` caps the events per call (None: all consecutive events of
        the kind in a claimed batch, up to the worker's batch size).

        When a call fails, a durable handler's batch (rolled back) is halved
        until the bad events stand alone; an in-memory handler's events are run
        once more one by one. Only the events that fail alone are retried (with
        ``retry``'s backoff) or sent to the dead letters.

        ``compensate`` (same signature, durable events only) runs when an operator drops
        dead events of this kind, in the transaction that deletes their rows: it undoes
        what scheduling them did (troops go home, costs are refunded).
        """
        if not kind or len(kind) > KIND_MAX_LEN:
            raise ValueError(f"kind must be 1..{KIND_MAX_LEN} chars, got {kind!r}")
        if kind in self._by_kind:
            raise ValueError(f"a handler for {kind!r} is already registered")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if max_batch is not None and max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        policy = retry or RetryPolicy()
        self._by_kind[kind] = Registration(
            kind, handler, durable, timeout_s, policy, max_batch, compensate
        )

    def add_job(self, name: str, func: Job, seconds: float) -> None:
        """Run ``func(ctx)`` every ``seconds``, once per world however many task servers run
        (``gameserver.jobs``: the job is leased like a tick shard)."""
        if not name or len(name) > KIND_MAX_LEN or any(c in name for c in "{} "):
            raise ValueError(f"a job name is 1..{KIND_MAX_LEN} chars without braces or spaces")
        if seconds <= 0:
            raise ValueError("a job's interval is > 0 s")
        if any(job.name == name for job in self.jobs):
            raise ValueError(f"a job named {name!r} is already registered")
        self.jobs.append(PeriodicJob(name, func, seconds))

    def handler(self, kind: str, **options: object) -> Callable[[Handler], Handler]:
        """Decorator form of ``register``."""

        def decorate(handler: Handler) -> Handler:
            self.register(kind, handler, **options)  # type: ignore[arg-type]
            return handler

        return decorate

    def get(self, kind: str) -> Registration | None:
        return self._by_kind.get(kind)

    def kinds(self) -> list[str]:
        return sorted(self._by_kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._by_kind

    def __len__(self) -> int:
        return len(self._by_kind)
