"""``db.driver.rows``: Core statements on the driver connection, inside the session's
transaction, with SQLAlchemy's results and errors (PostgreSQL fast path, SQLite through
the session)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import (
    Boolean,
    String,
    bindparam,
    event,
    func,
    insert,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.ids import IdGenerator
from common.queue.tx import Tx
from db import driver
from db.command_transaction import CommandTransaction
from db.connection_shelf import ConnectionShelf
from db.engine import is_constraint_race, is_database_outage, session_factory
from db.models import IdempotentResponse
from tests.calls import record_calls

T = IdempotentResponse.__table__.c
STORE = insert(IdempotentResponse.__table__).returning(T.key, T.body)  # type: ignore[arg-type]
READ = select(T.key, T.status, T.body).where(T.player_id == bindparam("player_id")).order_by(T.key)
IN_OWN_STATEMENT = select(
    literal_column("(statement_timestamp() = transaction_timestamp())", Boolean)
)
SIMPLE_STATEMENT = select(func.count()).select_from(IdempotentResponse.__table__)


def _row(key: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"player_id": 7, "key": key, "request_hash": "h", "status": 200, "body": body,
            "created_ms": 1}  # fmt: skip


class Statements:
    """Counts the statements SQLAlchemy itself sends (the fast path sends none)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.sent: list[str] = []
        event.listen(engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, *args: Any) -> None:
        self.sent.append(args[2])


@pytest.fixture
async def counted(engine: AsyncEngine) -> AsyncIterator[Statements]:
    yield Statements(engine)


async def test_rows_write_and_read_json_like_the_session(
    engine: AsyncEngine, counted: Statements
) -> None:
    body = {"order_id": 5, "cost": {"wood": 1.5}, "names": ["a", "b"]}
    async with session_factory(engine)() as session, session.begin():
        written = await driver.rows(session, STORE, _row("k1", body))
        assert [tuple(r) for r in written] == [("k1", body)]
        read = await driver.rows(session, READ, {"player_id": 7})
        assert [tuple(r) for r in read] == [("k1", 200, body)]
        # the same statement through SQLAlchemy gives the same rows
        assert [tuple(r) for r in await session.execute(READ, {"player_id": 7})] == [
            tuple(r) for r in read
        ]
    fast = engine.dialect.driver == "asyncpg"
    assert driver.FAST_PATH, "SQLAlchemy's asyncpg adapter changed: see db/driver.py"
    # SQLAlchemy sent the comparison read only on the fast path, everything on SQLite
    assert len([s for s in counted.sent if "idempotent_responses" in s]) == (1 if fast else 3)


async def test_a_rollback_undoes_fast_and_session_writes_alike(engine: AsyncEngine) -> None:
    factory = session_factory(engine)
    with pytest.raises(RuntimeError):
        async with factory() as session, session.begin():
            await driver.rows(session, STORE, _row("fast", {}))
            await session.execute(insert(IdempotentResponse.__table__), _row("slow", {}))  # type: ignore[arg-type]
            raise RuntimeError("roll back")
    async with factory() as session, session.begin():
        assert await driver.rows(session, READ, {"player_id": 7}) == []
        await session.execute(insert(IdempotentResponse.__table__), _row("slow", {}))  # type: ignore[arg-type]
        await driver.rows(session, STORE, _row("fast", {}))
    async with factory() as session:
        assert [r[0] for r in await driver.rows(session, READ, {"player_id": 7})] == [
            "fast",
            "slow",
        ]


async def test_a_read_that_locks_nothing_runs_before_begin(postgres_url: str) -> None:
    from common.settings import load_settings
    from db.engine import create_engine

    engine = create_engine(load_settings(database_url=postgres_url), pool_pre_ping=False)
    sent: list[str] = []

    def log(dbapi_connection: Any, *_: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(lambda r: sent.append(r.query))

    event.listen(engine.sync_engine.pool, "connect", log)
    try:
        factory = session_factory(engine)
        async with factory() as session, session.begin():
            await driver.rows(session, SIMPLE_STATEMENT, begin=False)
            assert not any(q.startswith("BEGIN") for q in sent)  # alone, no transaction yet
            await driver.rows(session, SIMPLE_STATEMENT)
            assert [q for q in sent if q.startswith("BEGIN")] == [sent[1]]  # it began first
            await driver.rows(session, SIMPLE_STATEMENT, begin=False)  # inside the transaction
        assert len([q for q in sent if q.startswith("BEGIN")]) == 1
        sent.clear()
        async with factory() as session, session.begin():
            await driver.rows(session, STORE, _row("w", {}))  # a write begins at once
            assert sent[0].startswith("BEGIN")
        async with factory() as session:
            assert [r[0] for r in await driver.rows(session, READ, {"player_id": 7})] == ["w"]
    finally:
        await engine.dispose()


async def test_errors_are_sqlalchemys(engine: AsyncEngine) -> None:
    factory = session_factory(engine)
    async with factory() as session, session.begin():
        await driver.rows(session, STORE, _row("dup", {}))
    with pytest.raises(IntegrityError) as raised:
        async with factory() as session, session.begin():
            await driver.rows(session, STORE, _row("dup", {}))
    assert is_constraint_race(raised.value)
    async with factory() as session:  # the pool's connection is usable again
        assert (await driver.rows(session, SIMPLE_STATEMENT))[0][0] == 1


async def test_a_dropped_connection_is_an_outage_and_is_replaced(postgres_url: str) -> None:
    from common.settings import load_settings
    from db.engine import create_engine

    settings = load_settings(database_url=postgres_url)
    engine = create_engine(settings, pool_size=1, max_overflow=0, pool_pre_ping=False)
    admin = create_engine(settings)
    try:
        factory = session_factory(engine)
        async with factory() as session:
            pid = (await driver.rows(session, select(func.pg_backend_pid())))[0][0]
            async with admin.connect() as other:  # returns once the backend is gone
                await other.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})
            with pytest.raises(DBAPIError) as raised:
                await driver.rows(session, SIMPLE_STATEMENT)
        assert is_database_outage(raised.value)
        assert raised.value.connection_invalidated
        async with factory() as session:  # the one pooled connection was replaced
            assert (await driver.rows(session, SIMPLE_STATEMENT))[0][0] == 0
    finally:
        await engine.dispose()
        await admin.dispose()


PLAIN_STORE = insert(IdempotentResponse.__table__)  # type: ignore[arg-type]


def _queries(engine: AsyncEngine) -> list[str]:
    """The queries asyncpg sends on ``engine``'s new connections (none elsewhere)."""
    sent: list[str] = []
    if engine.dialect.driver == "asyncpg":

        def log(dbapi_connection: Any, *_: Any) -> None:
            dbapi_connection.driver_connection.add_query_logger(lambda r: sent.append(r.query))

        event.listen(engine.sync_engine.pool, "connect", log)
    return sent


async def test_write_all_writes_every_row_in_one_round_trip(engine: AsyncEngine) -> None:
    sent = _queries(engine)
    async with engine.connect() as conn, conn.begin():
        await driver.write_all(conn, [(PLAIN_STORE, _row("a", {"n": 1})), (STORE, _row("b", {}))])
    if engine.dialect.driver == "asyncpg":
        assert len([q for q in sent if "INSERT" in q]) == 1 and sent[-1] == "COMMIT;", sent
    with pytest.raises(RuntimeError):
        async with engine.connect() as conn, conn.begin():
            await driver.write_all(conn, [(PLAIN_STORE, _row(f"r{i}", {})) for i in range(3)])
            raise RuntimeError("roll back")
    async with engine.connect() as conn, conn.begin():  # more than go together: per statement
        await driver.write_all(conn, [(PLAIN_STORE, _row(f"m{i:02}", {})) for i in range(12)])
    async with engine.connect() as conn:
        found = await driver.rows(conn, READ, {"player_id": 7})
    assert [(r[0], r[2]) for r in found] == [("a", {"n": 1}), ("b", {})] + [
        (f"m{i:02}", {}) for i in range(12)
    ]


# a guard: the row of ``key`` gets ``status``, if it has no status yet
CLAIM = (
    update(IdempotentResponse.__table__)  # type: ignore[arg-type]
    .where(T.player_id == 7, T.key == bindparam("claim_key"), T.status == 200)
    .values(status=bindparam("claim_status"))
    .returning(T.key)
)


async def _statuses(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        return {key: status for key, status, _ in await driver.rows(conn, READ, {"player_id": 7})}


async def test_guarded_writes_are_written_only_when_every_guard_touches_a_row(
    engine: AsyncEngine,
) -> None:
    """A command's closing statement: its spend must hold for its rows to be written. Alone
    (nothing written before it) it runs without BEGIN and COMMIT; two guards side by side
    may half hold, so they run in the transaction the caller rolls back."""
    sent = _queries(engine)
    async with engine.begin() as conn:
        await driver.write_all(conn, [(PLAIN_STORE, _row(k, {})) for k in ("a", "b")])
    before = len(sent)
    async with engine.connect() as conn, conn.begin():
        held = await driver.write_all(
            conn, [(PLAIN_STORE, _row("c", {"n": 1})), (PLAIN_STORE, _row("d", {}))],
            [(CLAIM, {"claim_key": "a", "claim_status": 201})], last=True,
        )  # fmt: skip
    closing = sent[before:]
    assert held
    assert await _statuses(engine) == {"a": 201, "b": 200, "c": 200, "d": 200}
    if engine.dialect.driver == "asyncpg":
        assert len(closing) == 1 and "BEGIN" not in closing[0] and "COMMIT" not in closing[0]
    async with engine.connect() as conn, conn.begin():  # "a" is claimed already: no row
        claimed = [(CLAIM, {"claim_key": "a", "claim_status": 202})]
        held = await driver.write_all(conn, [(PLAIN_STORE, _row("e", {}))], claimed, last=True)
        assert not held
    assert await _statuses(engine) == {"a": 201, "b": 200, "c": 200, "d": 200}
    # the same statement twice: its parameters apart; one guard fails, the caller rolls back
    guards = [
        (CLAIM, {"claim_key": "b", "claim_status": 203}),
        (CLAIM, {"claim_key": "a", "claim_status": 203}),
    ]
    async with engine.connect() as conn:
        async with conn.begin() as tx:
            assert not await driver.write_all(conn, [(PLAIN_STORE, _row("f", {}))], guards)
            await tx.rollback()
        async with conn.begin():
            guards[1] = (CLAIM, {"claim_key": "c", "claim_status": 203})
            assert await driver.write_all(conn, [(PLAIN_STORE, _row("f", {}))], guards, last=True)
    assert await _statuses(engine) == {"a": 201, "b": 203, "c": 203, "d": 200, "f": 200}
    before = len(sent)
    async with engine.connect() as conn, conn.begin():  # one row, no guard: alone as well
        assert await driver.write_all(conn, [(PLAIN_STORE, _row("g", {}))], last=True)
    if engine.dialect.driver == "asyncpg":
        assert len(sent[before:]) == 1 and "INSERT" in sent[before], sent[before:]


async def test_a_session_is_asked_for_its_connection_once_per_transaction(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ask crosses SQLAlchemy's greenlet bridge: a handler's statements asked as many
    times as they ran. A session's next transaction may hold another connection: asked again."""
    asked = record_calls(monkeypatch, AsyncSession, "connection")
    async with session_factory(engine)() as session:
        async with session.begin():
            await driver.rows(session, STORE, _row("k1", {}))
            for _ in range(3):
                assert len(await driver.rows(session, READ, {"player_id": 7})) == 1
        assert len(asked) == 1
        async with session.begin():
            await driver.rows(session, STORE, _row("k2", {}))
            assert len(await driver.rows(session, READ, {"player_id": 7})) == 2
            await session.rollback()
        assert len(asked) == 2
        async with session.begin():
            assert len(await driver.rows(session, READ, {"player_id": 7})) == 1  # k2 rolled back
        assert len(asked) == 3


async def test_a_transaction_commits_at_its_end_and_rolls_back_when_it_raises(
    engine: AsyncEngine,
) -> None:
    sent = _queries(engine)
    async with engine.connect() as conn:
        async with driver.transaction(conn):
            await driver.rows(conn, STORE, _row("kept", {}))  # a write sends BEGIN first
            assert conn.in_transaction()
        assert not conn.in_transaction()
        with pytest.raises(RuntimeError):
            async with driver.transaction(conn):
                await driver.rows(conn, STORE, _row("undone", {}))
                raise RuntimeError("roll back")
        async with driver.transaction(conn):  # a session joined to it commits with it
            session = AsyncSession(bind=conn)
            await session.execute(PLAIN_STORE, _row("orm", {}))
            await session.close()
        assert [r[0] for r in await driver.rows(conn, READ, {"player_id": 7}, begin=False)] == [
            "kept",
            "orm",
        ]
    if engine.dialect.driver == "asyncpg":
        ends = [q.split(";")[0] for q in sent if q.startswith(("BEGIN", "COMMIT", "ROLLBACK"))]
        assert ends == ["BEGIN", "COMMIT", "BEGIN", "ROLLBACK", "BEGIN", "COMMIT"], sent


async def test_a_transaction_that_sends_no_begin_ends_without_the_greenlet_bridge(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.util import concurrency

    sent = _queries(engine)
    async with engine.connect() as conn:
        await conn.commit()  # the connection is checked out and idle
        spawned = record_calls(monkeypatch, concurrency._AsyncIoGreenlet, "__init__")  # type: ignore[attr-defined]
        async with driver.transaction(conn):  # refused after its read
            await driver.rows(conn, SIMPLE_STATEMENT, begin=False)
        with pytest.raises(RuntimeError):
            async with driver.transaction(conn):
                await driver.rows(conn, SIMPLE_STATEMENT, begin=False)
                raise RuntimeError("refused")
        async with driver.transaction(conn):  # its one closing write commits by itself
            await driver.rows(conn, PLAIN_STORE, _row("alone", {}), begin=False)
        assert not conn.in_transaction()
        if engine.dialect.driver == "asyncpg":
            assert spawned == []  # each would have mapped a frame stack for nothing
            assert not [q for q in sent if q.startswith(("BEGIN", "COMMIT", "ROLLBACK"))], sent
        monkeypatch.undo()
        async with driver.transaction(conn):
            found = await driver.rows(conn, READ, {"player_id": 7}, begin=False)
    assert [r[0] for r in found] == ["alone"]


ALONG = select(T.request_hash, T.status, T.body).where(
    T.player_id == bindparam("player_id"), T.key == bindparam("key")
)


async def test_rows_along_reads_both_in_one_statement_as_apart(engine: AsyncEngine) -> None:
    sent = _queries(engine)
    body = {"order_id": 5, "names": ["a"]}
    async with engine.connect() as conn, driver.transaction(conn):
        for key in ("c", "a", "b"):
            await driver.rows(conn, STORE, {**_row(key, body), "request_hash": f"h{key}"})
    # the game's columns need no names, and its rows keep its order
    unnamed = (
        select(T.key, literal_column("'tag'", String), literal_column("''", String))
        .where(T.player_id == bindparam("player_id"))
        .order_by(T.key.desc())
    )
    async with engine.connect() as conn:
        for key, along_rows in (("b", [("hb", 200, body)]), ("none", [])):
            sent.clear()
            both = await driver.rows_along(
                conn, unnamed, {"player_id": 7}, ALONG, {"player_id": 7, "key": key}
            )
            if engine.dialect.driver != "asyncpg":
                assert both is None  # read apart elsewhere
                continue
            assert both is not None
            mine, theirs = both
            assert [tuple(r) for r in mine] == [(k, "tag", "") for k in ("c", "b", "a")]
            assert [tuple(r) for r in theirs] == along_rows
            await asyncio.sleep(0)  # asyncpg calls its query loggers soon after
            assert len([q for q in sent if "idempotent_responses" in q]) == 1, sent
        if engine.dialect.driver == "asyncpg":  # no rows of the game's, one along
            both = await driver.rows_along(
                conn, unnamed, {"player_id": 8}, ALONG, {"player_id": 7, "key": "a"}
            )
            assert (
                both is not None
                and both[0] == []
                and [tuple(r) for r in both[1]] == [("ha", 200, body)]
            )


async def test_a_commands_read_takes_the_frameworks_along_where_it_can(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as conn, driver.transaction(conn):
        await driver.rows(conn, STORE, _row("k", {"n": 1}))
    shelf = ConnectionShelf(engine, keep=1)
    async with CommandTransaction(shelf) as command:
        tx = Tx(None, 0, 1.0, IdGenerator(), command=command)
        tx.read_along(ALONG, {"player_id": 7, "key": "k"})
        first = await tx.read(SIMPLE_STATEMENT)
        taken = tx.along_rows
        again = await tx.read(SIMPLE_STATEMENT)  # only the first read takes it
    await shelf.close()
    assert first[0][0] == again[0][0] == 1
    if engine.dialect.driver == "asyncpg":
        assert taken is not None and [tuple(r) for r in taken] == [("h", 200, {"n": 1})]
    else:
        assert taken is None  # the caller reads it itself
