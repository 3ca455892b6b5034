"""How an event is stored in Redis: a self-delimiting blob, header then msgpack body.

``blob = b"\\xd9\\x28" + priority (4 hex) + id (16 hex) + due ms (13 digits)
+ b"d"|b"m" (durable or in memory) + body size (6 hex) + body`` where
``body = msgpack([id, kind, village_id, due_ms, priority, payload, attempts,
durable])``. The first 42 bytes are one msgpack str8, so a concatenation of
blobs is a msgpack stream of (header, body) pairs: Python decodes a whole
claimed batch with one ``unpackb`` call. Lua reads the header only: the
member (first 22 bytes) for ordering, the due time as a ready-made score,
the durable flag, and the body size to split a batch.
"""

from __future__ import annotations

from itertools import starmap
from operator import itemgetter
from typing import Any

import msgpack

from common.queue.constants import (
    BLOB_PREFIX,
    BODY_MAX,
    HEADER_LEN,
    MEMBER_LEN,
    PRIORITY_BIAS,
)
from common.queue.errors import MalformedEvent
from common.queue.events import Event, _EventBuilder

HEADER_DURABLE = BLOB_PREFIX + b"%04x%016x%013dd%06x"  # % (priority + bias, id, due, size)
HEADER_MEMORY = BLOB_PREFIX + b"%04x%016x%013dm%06x"
_MEMBER = BLOB_PREFIX + b"%04x%016x"
_packb = msgpack.Packer().pack  # msgpack.packb builds a Packer per call: twice as slow
_unpackb = msgpack.unpackb
# a header as msgpack decodes it (a str of 40 chars): its member, less the str8 prefix
_member_text = itemgetter(slice(0, MEMBER_LEN - len(BLOB_PREFIX)))


def member(priority: int, event_id: int) -> bytes:
    """The first bytes of a blob: their order within one due ms is (priority, id)."""
    return _MEMBER % (priority + PRIORITY_BIAS, event_id)


def id_key(event_id: int) -> bytes:
    """An event id as 16 hex digits, as in its member (and the ``byid`` hash)."""
    return b"%016x" % event_id


def id_pattern(event_id: int) -> bytes:
    """A SCAN MATCH pattern for the blob of ``event_id``."""
    return b"??????" + id_key(event_id) + b"*"


def pack_body(value: Any) -> bytes:
    """msgpack; raises ValueError past BODY_MAX (the header holds 6 hex digits of size)."""
    body = _packb(value)
    if len(body) > BODY_MAX:
        raise ValueError(f"payload too large: {len(body)} bytes encoded, at most {BODY_MAX}")
    return body


def encode(
    event_id: int,
    kind: str,
    village_id: int,
    due_ms: int,
    priority: int,
    payload: dict[str, Any],
    attempts: int,
    durable: bool,
    score_ms: int | None = None,
) -> bytes:
    """The blob of an event. ``score_ms`` (default ``due_ms``) is when it is to run: a retry
    runs later than the game time ``due_ms`` its handler sees."""
    body = pack_body([event_id, kind, village_id, due_ms, priority, payload, attempts, durable])
    header = HEADER_DURABLE if durable else HEADER_MEMORY
    score = due_ms if score_ms is None else score_ms
    return header % (priority + PRIORITY_BIAS, event_id, score, len(body)) + body


def encode_event(
    event: Event,
    *,
    due_ms: int | None = None,
    attempts: int | None = None,
    score_ms: int | None = None,
) -> bytes:
    """Re-encode ``event``, optionally with a new due time, attempt count or run time."""
    return encode(
        event.id,
        event.kind,
        event.village_id,
        event.due_ms if due_ms is None else due_ms,
        event.priority,
        event.payload,
        event.attempts if attempts is None else attempts,
        event.durable,
        score_ms,
    )


def _well_typed(e: _EventBuilder) -> bool:
    return (
        type(e.kind) is str
        and type(e.payload) is dict
        and type(e.village_id) is int
        and type(e.id) is int
        and type(e.due_ms) is int
        and type(e.priority) is int
        and type(e.attempts) is int
    )


def decode(blob: bytes) -> Event:
    """Decode one blob; raise MalformedEvent with a reason an operator can read."""
    if blob[:2] != BLOB_PREFIX or len(blob) < HEADER_LEN:
        raise MalformedEvent("not an event blob (bad header)")
    try:
        built = _EventBuilder(*_unpackb(blob[HEADER_LEN:], strict_map_key=False))
    except Exception as exc:
        raise MalformedEvent(f"undecodable payload: {type(exc).__name__}: {exc}") from None
    if not _well_typed(built):
        raise MalformedEvent("payload fields have the wrong types")
    if blob[:MEMBER_LEN] != member(built.priority, built.id):
        raise MalformedEvent("payload header does not match its body")
    built.__class__ = Event  # type: ignore[assignment]  # see _EventBuilder
    return built  # type: ignore[return-value]


def decode_stream(stream: bytes, n: int) -> list[Event] | None:
    """Decode a claimed batch (``n`` concatenated blobs) with one msgpack call: the hot path.

    Returns None if anything is off, a header that names another event than
    its body included; ``split`` and ``decode_many`` then name the malformed
    entries.
    """
    try:
        items = _unpackb(b"\xdd" + (2 * n).to_bytes(4, "big") + stream, strict_map_key=False)
    except Exception:
        return None
    if len(items) != 2 * n:
        return None
    try:
        events: list[Any] = list(starmap(_EventBuilder, items[1::2]))
    except TypeError:
        return None
    cls = Event
    members: list[int] = []  # (priority + bias, id) as one number: 20 hex digits, the member
    add = members.append
    for e in events:
        if not (
            type(e.kind) is str
            and type(e.payload) is dict
            and type(e.village_id) is int
            and type(e.id) is int
            and type(e.due_ms) is int
            and type(e.priority) is int
            and type(e.attempts) is int
        ):
            return None
        add((e.priority + PRIORITY_BIAS) << 64 | e.id)
        e.__class__ = cls  # see _EventBuilder
    # Each header (a str, every other item) must name its body's event: one comparison of
    # the batch's members, formatted and sliced in C (~0.1 us an event).
    try:
        if "".join(map(_member_text, items[::2])) != ("%020x" * n) % tuple(members):
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    return events


def split(stream: bytes) -> list[bytes]:
    """The blobs of a concatenation, cut by their header's body size.

    Cuts where the Lua scripts do (claim.lua checked each blob's size field
    as they read it: ``tonumber(field, 16)``, which stops at a NUL). A header
    that cannot be read ends the split: the rest is one (bad) blob.
    """
    blobs = []
    pos, end = 0, len(stream)
    while pos < end:
        head = stream[pos : pos + HEADER_LEN]
        try:
            size = int(head[36:42].split(b"\0", 1)[0], 16) if head[:2] == BLOB_PREFIX else -1
        except ValueError:
            size = -1
        stop = pos + HEADER_LEN + size
        if size < 0 or stop > end:
            blobs.append(stream[pos:])
            break
        blobs.append(stream[pos:stop])
        pos = stop
    return blobs


def decode_many(blobs: list[bytes]) -> tuple[list[Event], list[tuple[bytes, str]]]:
    """Decode blob by blob: (events, [(member, reason)] of the malformed ones)."""
    events: list[Event] = []
    bad: list[tuple[bytes, str]] = []
    for b in blobs:
        try:
            events.append(decode(b))
        except MalformedEvent as exc:
            bad.append((b[:MEMBER_LEN], str(exc)))
    return events, bad


def split_member(member_: bytes) -> tuple[int, int]:
    """(priority, id) of a member."""
    if member_[:2] != BLOB_PREFIX:
        raise ValueError(f"not a member: {member_[:MEMBER_LEN]!r}")
    return int(member_[2:6], 16) - PRIORITY_BIAS, int(member_[6:MEMBER_LEN], 16)


def pack(value: Any) -> bytes:
    return _packb(value)


def unpack(data: bytes) -> Any:
    return _unpackb(data, strict_map_key=False)
