"""Encoding of members and blobs: the tie rule lives in the member's byte order."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gameserver.queue import Event, MalformedEvent, codec
from gameserver.queue.constants import PRIORITY_MAX, PRIORITY_MIN

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
    assert blob[:20] == codec.member(priority, event_id)
    assert blob[20:33] == b"%013d" % due
    event = codec.decode(blob)
    assert event == Event(event_id, kind, village, due, priority, payload, 2, durable)
    assert type(event) is Event
    events, bad = codec.decode_many([blob, blob])
    assert events == [event, event] and bad == []


def test_decoded_events_are_frozen() -> None:
    event = codec.decode(codec.encode(5, "k", 1, 10, 0, {}, 0, False))
    try:
        event.kind = "other"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a decoded event must be immutable")
    assert event == Event(5, "k", 1, 10, 0, {}, 0, False)


def test_malformed_blobs_are_reported_with_a_reason() -> None:
    good = codec.encode(7, "k", 1, 10, 0, {"a": 1}, 0, False)
    head = codec.encode(8, "k", 1, 10, 0, {}, 0, False)[:33]
    garbage = head + b"\xc1\xc1not msgpack"
    wrong_types = head + msgpack.packb([8, 42, "village", 10, 0, [], 0, False])
    short = head + msgpack.packb([8, "k"])
    events, bad = codec.decode_many([garbage, good, wrong_types, short])
    assert [e.id for e in events] == [7]
    assert [member for member, _ in bad] == [codec.member(0, 8)] * 3
    assert "undecodable" in bad[0][1]
    assert "wrong types" in bad[1][1]
    assert "undecodable" in bad[2][1]


def test_decode_checks_the_header_against_the_body() -> None:
    good = codec.encode(7, "k", 1, 10, 0, {}, 0, False)
    with pytest.raises(MalformedEvent, match="header"):
        codec.decode(codec.member(0, 8) + good[20:])
    assert codec.split_member(codec.member(-3, 99)) == (-3, 99)
