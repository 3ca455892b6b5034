"""The cheap village-order check of a claimed batch: a probe of the due index answers for a
batch without rows of its own, SQLite is read on the worker's thread (``SqliteReader``),
and neither lets an event run ahead of an earlier pending one of its village."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import ManualClock
from common.queue import Event, EventQueue, NewEvent
from common.queue.durable import add_durable_events, earlier_in_villages, order_reads
from common.queue.handlers import HandlerRegistry
from common.queue.sqlite_reader import SqliteReader
from common.queue.tx import Tx
from db import events as pending
from tests.queue.conftest import START_MS, Workers, eventually

KIND = "arrive"


def _recording(seen: list[int]) -> HandlerRegistry:
    async def record(ctx: Tx, events: list[Event]) -> None:
        seen.extend(e.id for e in events)

    registry = HandlerRegistry()
    registry.register(KIND, record)
    return registry


def _ran(seen: list[int], n: int):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return len(seen) >= n

    return check


async def test_an_in_memory_event_waits_for_an_earlier_durable_one_redis_lacks(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """A batch of in-memory events only has no rows of its own: the probe of the due index
    finds the earlier row of the village, and the event waits for it."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        [earlier] = await add_durable_events(
            session, [NewEvent(KIND, 0, START_MS + 100)], clock=clock, ids=queue.ids
        )
    # its index was lost; the in-memory event of the same village is indexed
    [later] = await queue.schedule_many([NewEvent(KIND, 0, START_MS + 500)])
    workers.start(queue, _recording(seen), 0, sessions=sessions)
    await clock.advance(1_000)
    await eventually(_ran(seen, 2))
    assert seen == [earlier.id, later]


async def test_the_probe_lets_an_event_pass_a_pending_one_of_another_village(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    """A pending row due earlier makes the probe answer yes; the per-village read then
    finds that it is another village's, and the event runs."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        # village 16 is in partition 0 too, and its event is never indexed
        [other] = await add_durable_events(
            session, [NewEvent(KIND, 16, START_MS + 100)], clock=clock, ids=queue.ids
        )
    [mine] = await queue.schedule_many([NewEvent(KIND, 0, START_MS + 500)])
    worker = workers.start(queue, _recording(seen), 0, sessions=sessions)
    await clock.advance(1_000)
    await eventually(_ran(seen, 1))
    assert seen == [mine]
    assert worker.metrics.held_back.labels("0")._value.get() == 0
    async with sessions() as session:  # not run, not indexed: only the reconciler does that
        assert await pending.earliest_pending(session) is not None
        assert other.id not in seen


async def test_a_dead_earlier_event_holds_nothing_back(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
) -> None:
    seen: list[int] = []
    async with sessions() as session, session.begin():
        [dead] = await add_durable_events(
            session, [NewEvent(KIND, 0, START_MS + 100)], clock=clock, ids=queue.ids
        )
        await pending.mark_dead(session, [(dead.id, 5, "boom")], START_MS)
    [later] = await queue.schedule_many([NewEvent(KIND, 0, START_MS + 500)])
    workers.start(queue, _recording(seen), 0, sessions=sessions)
    await clock.advance(1_000)
    await eventually(_ran(seen, 1))
    assert seen == [later]


async def test_a_worker_whose_sqlite_read_fails_asks_its_session(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
    workers: Workers,
    tmp_path: Path,
) -> None:
    """The reader cannot open its file (on PostgreSQL there is no reader at all): the order
    check goes through the session and still holds the later event back."""
    seen: list[int] = []
    async with sessions() as session, session.begin():
        earlier, later = await add_durable_events(
            session,
            [NewEvent(KIND, 0, START_MS + 100), NewEvent(KIND, 0, START_MS + 500)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    await queue.index([later])
    worker = workers.start(queue, _recording(seen), 0, sessions=sessions)
    worker._reader = SqliteReader(str(tmp_path / "no such folder" / "world.db"))
    await clock.advance(1_000)
    await eventually(_ran(seen, 2))
    assert seen == [earlier.id, later.id]


async def test_the_sqlite_reader_answers_as_the_session_does(
    queue: EventQueue,
    sessions: async_sessionmaker[AsyncSession],
    clock: ManualClock,
) -> None:
    """Every rule of the check, both ways: the first earlier pending event per village of the
    batch, not one of the batch, not dead, due no later than the batch's last event."""
    async with sessions() as session, session.begin():
        rows = await add_durable_events(
            session,
            [
                NewEvent(KIND, 1, START_MS + 20, priority=1),  # village 1's first...
                NewEvent(KIND, 1, START_MS + 20, priority=0),  # ... this one: lower priority
                NewEvent(KIND, 2, START_MS + 10),  # village 2: dead, below
                NewEvent(KIND, 2, START_MS + 40),  # village 2's first that holds it
                NewEvent(KIND, 3, START_MS + 900),  # due after the batch's last event
                NewEvent(KIND, 4, START_MS + 5),  # another village
                NewEvent(KIND, 5, START_MS + 30),  # in the batch itself
            ],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
        await pending.mark_dead(session, [(rows[2].id, 5, "boom")], START_MS)
    batch = [
        Event(rows[6].id, KIND, 5, START_MS + 30, 0, {}, 0, True),
        *(Event(9_000 + v, KIND, v, START_MS + 100, 0, {}, 0, False) for v in (1, 2, 3)),
    ]
    expected = {1: rows[1].id, 2: rows[3].id}
    async with sessions() as session:
        found = await earlier_in_villages(session, batch)
        head = await pending.earliest_pending(session)
        dialect = session.get_bind().dialect.name
    assert {v: e.id for v, e in found.items()} == expected
    assert head is not None and head.id == rows[5].id
    # the worker's read: on PostgreSQL both in one statement, the same answer
    async with sessions() as session:
        assert await order_reads(session, batch, lookahead=True) == (head, found)
        assert await order_reads(session, batch, lookahead=False) == (None, found)
    # without rows of its own the batch is answered by the probe first: same answer
    async with sessions() as session:
        found = await earlier_in_villages(session, batch[1:])
    assert {v: e.id for v, e in found.items()} == expected
    reader = SqliteReader.for_sessions(sessions)
    if dialect != "sqlite":
        assert reader is None
        return
    assert reader is not None
    try:
        for part in (batch, batch[1:]):
            answer = reader.order(part, lookahead=True)
            assert answer is not None
            read_head, read = answer
            assert read == found
            assert read_head == head
        # nothing pending that early: the probe alone answers
        assert reader.order(batch[1:2], lookahead=False) == (None, {1: found[1]})
        async with sessions() as session, session.begin():
            await session.execute(text("DELETE FROM scheduled_events"))
        assert reader.order(batch[1:], lookahead=True) == (None, {})
    finally:
        reader.close()


async def test_the_order_read_tells_a_head_without_earlier_events_and_nothing_at_all(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], clock: ManualClock
) -> None:
    async with sessions() as session, session.begin():
        rows = await add_durable_events(
            session,
            [NewEvent(KIND, 7, START_MS + 50), NewEvent(KIND, 8, START_MS + 60)],
            clock=clock, ids=queue.ids,
        )  # fmt: skip
    # village 8's event is the batch; village 7's is the world's head, of another village
    batch = [Event(rows[1].id, KIND, 8, START_MS + 60, 0, {}, 0, True)]
    async with sessions() as session:
        head, earlier = await order_reads(session, batch, lookahead=True)
    assert head is not None and (head.id, head.village_id, head.due_ms) == (
        rows[0].id, 7, START_MS + 50,
    )  # fmt: skip
    assert earlier == {}
    async with sessions() as session, session.begin():
        await pending.mark_failed(session, [(rows[0].id, 1, "boom")])  # failing: not a head
    async with sessions() as session:
        head, earlier = await order_reads(session, batch, lookahead=True)
    assert head is not None and head.id == rows[1].id  # the batch's own row is the head now
    assert earlier == {}  # and village 7's failing event holds its own village only
    async with sessions() as session, session.begin():
        await pending.mark_failed(session, [(rows[1].id, 1, "boom")])
    async with sessions() as session:
        assert await order_reads(session, batch, lookahead=True) == (None, {})
