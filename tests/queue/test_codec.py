"""Encoding of members and blobs: the tie rule lives in the member's byte order."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.queue import Event, MalformedEvent, codec
from common.queue.constants import PRIORITY_MAX, PRIORITY_MIN

priorities = st.integers(PRIORITY_MIN, PRIORITY_MAX)
ids = st.integers(1, (1 << 63) - 1)
payloads = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.booleans(), st.none()),
    max_size=5,
)


@given(st.lists(st.tuples(priorities, ids), min_size=2, max_size=50, unique_by=lambda t: t[1]))
def test_member_bytes_sort_like_priority_then_id(pairs: list[tuple[int, int]]) -> None:
    by_bytes = sorted(pairs, key=lambda p: codec.member(*p))
    assert by_bytes == sorted(pairs)


@given(ids, st.text(min_size=1, max_size=32), st.integers(), priorities, payloads, st.booleans())
def test_blob_round_trip(
    event_id: int, kind: str, village: int, priority: int, payload: dict, durable: bool
) -> None:
    village = village % (1 << 62)
    due = 1_800_000_000_123
    blob = codec.encode(event_id, kind, village, due, priority, payload, 2, durable)
    assert blob[:22] == codec.member(priority, event_id)
    assert blob[22:35] == b"%013d" % due
    assert blob[35:36] == (b"d" if durable else b"m")
    assert int(blob[36:42], 16) == len(blob) - 42
    event = codec.decode(blob)
    assert event == Event(event_id, kind, village, due, priority, payload, 2, durable)
    assert type(event) is Event
    assert codec.decode_stream(blob + blob, 2) == [event, event]
    assert codec.split(blob + blob) == [blob, blob]


def test_decoded_events_are_frozen() -> None:
    event = codec.decode(codec.encode(5, "k", 1, 10, 0, {}, 0, False))
    try:
        event.kind = "other"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a decoded event must be immutable")
    assert event == Event(5, "k", 1, 10, 0, {}, 0, False)


def _blob(event_id: int, body: bytes) -> bytes:
    """A blob with a correct header around any body."""
    return codec.HEADER_MEMORY % (32768, event_id, 10, len(body)) + body


def test_malformed_blobs_are_reported_with_a_reason() -> None:
    good = codec.encode(7, "k", 1, 10, 0, {"a": 1}, 0, False)
    garbage = _blob(8, b"\xc1\xc1not msgpack")
    wrong_types = _blob(8, msgpack.packb([8, 42, "village", 10, 0, [], 0, False]))
    short = _blob(8, msgpack.packb([8, "k"]))
    stream = garbage + good + wrong_types + short
    assert codec.decode_stream(stream, 4) is None  # the fast path gives up ...
    events, bad = codec.decode_many(codec.split(stream))  # ... the slow one names them
    assert [e.id for e in events] == [7]
    assert [member for member, _ in bad] == [codec.member(0, 8)] * 3
    assert "undecodable" in bad[0][1]
    assert "wrong types" in bad[1][1]
    assert "undecodable" in bad[2][1]


def test_split_stops_at_an_unreadable_header() -> None:
    good = codec.encode(7, "k", 1, 10, 0, {}, 0, False)
    broken = good[:36] + b"zzzzzz" + good[42:]
    assert codec.split(good + broken + good) == [good, broken + good]
    too_long = good[:36] + b"ffffff" + good[42:]
    assert codec.split(good + too_long) == [good, too_long]
    _, bad = codec.decode_many([broken + good])
    assert bad and "undecodable" in bad[0][1]


def test_decode_checks_the_header_against_the_body() -> None:
    good = codec.encode(7, "k", 1, 10, 0, {}, 0, False)
    with pytest.raises(MalformedEvent, match="header"):
        codec.decode(codec.member(0, 8) + good[22:])
    with pytest.raises(MalformedEvent, match="bad header"):
        codec.decode(b"xx" + good[2:])
    assert codec.split_member(codec.member(-3, 99)) == (-3, 99)


def test_the_batch_fast_path_checks_each_header_against_its_body() -> None:
    """A header naming another event used to run as its body's event."""
    a = codec.encode(7, "k", 1, 10, 0, {}, 0, False)
    b = codec.encode(8, "k", 1, 10, 0, {}, 0, False)
    other_priority = codec.encode(7, "k", 1, 10, 1, {}, 0, False)
    for forged in (a[:42] + b[42:], other_priority[:42] + a[42:]):
        assert codec.decode_stream(b + forged + b, 3) is None
        events, bad = codec.decode_many(codec.split(b + forged + b))
        assert [e.id for e in events] == [8, 8]
        assert bad == [(forged[:22], "payload header does not match its body")]
    assert codec.decode_stream(a + b + other_priority, 3) == [
        codec.decode(a), codec.decode(b), codec.decode(other_priority)
    ]  # fmt: skip


def test_split_reads_a_size_field_as_the_lua_scripts_do() -> None:
    """``tonumber(field, 16)`` stops at a NUL: claim.lua frames such a blob, so Python must
    cut it at the same place."""
    body = codec.pack([9, "k", 1, 10, 0, {}, 0, False])
    blob = codec.HEADER_MEMORY[:-4] % (32768, 9, 10) + b"%x" % len(body)
    blob = blob.ljust(42, b"\0") + body
    good = codec.encode(7, "k", 1, 10, 0, {}, 0, False)
    assert codec.split(good + blob + good) == [good, blob, good]
