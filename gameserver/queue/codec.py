"""How an event is stored in Redis: a fixed-width header, then msgpack.

``blob = member (20: 4 hex priority + 16 hex id) + due ms (13 decimal digits)
+ msgpack([id, kind, village_id, due_ms, priority, payload, attempts, durable])``.
Lua reads the header only (member, due time as a ready-made score); Python
decodes the body into an ``Event`` with one msgpack call.
"""

from __future__ import annotations

from typing import Any

import msgpack

from gameserver.queue.constants import HEADER_LEN, MEMBER_LEN, PRIORITY_BIAS
from gameserver.queue.errors import MalformedEvent
from gameserver.queue.events import Event, _EventBuilder

_HEADER = b"%04x%016x%013d"
_MEMBER = b"%04x%016x"
_packb = msgpack.Packer().pack  # msgpack.packb builds a Packer per call: twice as slow
_unpackb = msgpack.unpackb


def member(priority: int, event_id: int) -> bytes:
    """The sorted-set member: lexicographic order within one due ms is (priority, id)."""
    return _MEMBER % (priority + PRIORITY_BIAS, event_id)


def id_key(event_id: int) -> bytes:
    """The payload-hash field of an event: the id part of its member."""
    return b"%016x" % event_id


def encode(
    event_id: int,
    kind: str,
    village_id: int,
    due_ms: int,
    priority: int,
    payload: dict[str, Any],
    attempts: int,
    durable: bool,
) -> bytes:
    head = _HEADER % (priority + PRIORITY_BIAS, event_id, due_ms)
    return head + _packb([event_id, kind, village_id, due_ms, priority, payload, attempts, durable])


def encode_event(event: Event, *, due_ms: int | None = None, attempts: int | None = None) -> bytes:
    """Re-encode ``event``, optionally with a new due time or attempt count."""
    return encode(
        event.id,
        event.kind,
        event.village_id,
        event.due_ms if due_ms is None else due_ms,
        event.priority,
        event.payload,
        event.attempts if attempts is None else attempts,
        event.durable,
    )


def _valid(e: _EventBuilder) -> bool:
    return (
        type(e.id) is int
        and type(e.kind) is str
        and type(e.village_id) is int
        and type(e.due_ms) is int
        and type(e.priority) is int
        and type(e.payload) is dict
        and type(e.attempts) is int
    )


def decode(blob: bytes) -> Event:
    """Decode one stored event; raise MalformedEvent with a reason an operator can read."""
    try:
        built = _EventBuilder(*_unpackb(blob[HEADER_LEN:], strict_map_key=False))
    except Exception as exc:
        raise MalformedEvent(f"undecodable payload: {type(exc).__name__}: {exc}") from None
    if not _valid(built):
        raise MalformedEvent("payload fields have the wrong types")
    if blob[:MEMBER_LEN] != member(built.priority, built.id):
        raise MalformedEvent("payload header does not match its body")
    built.__class__ = Event  # type: ignore[assignment]  # see _EventBuilder
    return built  # type: ignore[return-value]


def decode_many(blobs: list[bytes]) -> tuple[list[Event], list[tuple[bytes, str]]]:
    """Decode a claimed batch: (events, [(member, reason)] of undecodable blobs).

    The hot path of the queue: the happy case is inlined, failures take the
    slow path of ``decode`` for their reason.
    """
    events: list[Any] = []
    bad: list[tuple[bytes, str]] = []
    append = events.append
    unpack = _unpackb
    builder = _EventBuilder
    cls = Event
    for b in blobs:
        try:
            e = builder(*unpack(b[HEADER_LEN:], strict_map_key=False))
            if (
                type(e.kind) is str
                and type(e.payload) is dict
                and type(e.village_id) is int
                and type(e.id) is int
                and type(e.due_ms) is int
                and type(e.priority) is int
                and type(e.attempts) is int
            ):
                e.__class__ = cls  # type: ignore[assignment]
                append(e)
                continue
        except Exception:
            pass
        try:
            decode(b)
            reason = "payload fields have the wrong types"
        except MalformedEvent as exc:
            reason = str(exc)
        bad.append((b[:MEMBER_LEN], reason))
    return events, bad


def split_member(member_: bytes) -> tuple[int, int]:
    """(priority, id) of a member."""
    return int(member_[:4], 16) - PRIORITY_BIAS, int(member_[4:MEMBER_LEN], 16)


def pack(value: Any) -> bytes:
    return _packb(value)


def unpack(data: bytes) -> Any:
    return _unpackb(data, strict_map_key=False)
