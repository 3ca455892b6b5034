"""The values the queue hands around: events, new events, claims, dead letters, stats."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """A scheduled event as a handler sees it.

    ``durable`` events have a ``scheduled_events`` row (the DB is their truth);
    others live in Redis only. ``attempts`` counts earlier failed runs.
    """

    id: int
    kind: str
    village_id: int
    due_ms: int
    priority: int
    payload: dict[str, Any]
    attempts: int
    durable: bool


@dataclass(slots=True)
class _EventBuilder:
    """Same fields and slot layout as ``Event`` but mutable, so it is built faster.

    ``codec`` builds one and then sets its ``__class__`` to ``Event``: the
    result is an ordinary frozen ``Event`` (equality, hashing, immutability).
    It is on the queue's hot path: every claimed event is built this way.
    """

    id: int
    kind: str
    village_id: int
    due_ms: int
    priority: int
    payload: dict[str, Any]
    attempts: int
    durable: bool


@dataclass(slots=True)
class NewEvent:
    """An event to schedule. Lower ``priority`` runs first among events due in the same ms.

    ``id`` is normally left out and drawn from the queue's id generator; give
    one only if you made it with an ``IdGenerator`` (ids order ties, see
    ``EventQueue``).
    """

    kind: str
    village_id: int
    due_ms: int
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    id: int | None = None


@dataclass(slots=True)
class Claim:
    """One claimed batch: ``events`` in run order, plus entries that could not be decoded."""

    partition: int
    token: bytes
    events: list[Event]
    bad: list[tuple[bytes, str]]  # (member, reason): undecodable, dead-lettered by the worker
    next_due_ms: int | None  # earliest due time still waiting in the partition
    next_deadline_ms: int | None  # earliest lease deadline of an in-flight batch
    # (member, reason) of entries the claim script itself sent to *dead*: not framed as a
    # blob, or scored outside 0..DUE_MS_MAX; they are in no batch
    buried: list[tuple[bytes, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events or self.bad)


@dataclass(frozen=True, slots=True)
class DeadEvent:
    """An event that failed too often or could not be decoded."""

    partition: int
    id: int
    member: bytes
    error: str
    attempts: int
    died_ms: int
    event: Event | None  # None when the payload is missing or malformed


@dataclass(frozen=True, slots=True)
class PartitionStats:
    partition: int
    depth: int  # events waiting in *due* (including future ones)
    ready: int  # of which due now
    inflight: int  # events claimed and not yet acked
    dead: int
    oldest_due_ms: int | None
    lag_ms: int  # now - oldest due time, 0 if nothing is overdue
    # why this partition could not be read (a key of the wrong type): its figures are zeros
    error: str | None = None
