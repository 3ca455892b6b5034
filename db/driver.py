"""Core statements run on the driver connection under a session's transaction.

A command is a handful of small statements, and on PostgreSQL most of its CPU went into
SQLAlchemy's execution layers around them (ORM session, Core execution context, the
greenlet bridge, result objects), about as much again as the driver and the database
took. ``rows`` compiles a Core statement once per dialect and hands it straight to
asyncpg (its own prepared-statement cache) on the connection the session's transaction
holds, so it commits or rolls back with everything else the transaction did.

What takes the fast path: a statement object compiled before (statements built once at
import, as the framework's and games' hot statements are), whose result columns are of
types asyncpg returns as SQLAlchemy would (integers, strings, booleans, JSON). Anything
else, and every other driver (SQLite), runs through the session as usual, with the same
results. Rows are plain sequences (index or unpack them; no attribute access).

Errors are SQLAlchemy's: a driver error is wrapped as SQLAlchemy wraps it (``DBAPIError``
subclasses carrying the SQLSTATE), and a connection the server dropped is invalidated, so
``db.engine``'s classifiers and every retry loop treat both paths alike.

The one place that relies on SQLAlchemy's asyncpg adapter internals (how it starts its
transaction lazily); ``tests/db/test_driver.py`` fails if a SQLAlchemy release changes them,
and ``FAST_PATH`` is off (everything runs through the session) when they are missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from itertools import groupby
from typing import Any, Protocol

from sqlalchemy import (
    JSON,
    Boolean,
    CompoundSelect,
    Insert,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    exists,
    false,
    literal_column,
    select,
)
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import ValuesBase
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.visitors import replacement_traverse
from sqlalchemy.util.concurrency import greenlet_spawn

Rows = Sequence[Sequence[Any]]

FAST_PATH = all(
    hasattr(AsyncAdapt_asyncpg_connection, name)
    for name in ("_transaction", "_execute_mutex", "_start_transaction", "_handle_exception")
)

# result column types asyncpg decodes to what SQLAlchemy's result processing gives
_AS_IS = (Integer, String, Boolean, JSON)
_MAX_STATEMENTS = 1024  # a game that builds statements per call falls back, not grows


class Prepared:
    """A statement compiled once, as the driver runs it (``rows``, ``rows_each``)."""

    __slots__ = ("compiled", "each_sql", "names", "processors", "statement")

    def __init__(self, statement: Executable, compiled: SQLCompiler) -> None:
        self.statement = statement  # held: the cache is keyed by its id()
        self.compiled = compiled
        self.names = tuple(compiled.positiontup or ())
        self.processors: dict[str, Any] = dict(compiled._bind_processors)
        # a read run for many argument lists at once: each row tagged with its list's index
        self.each_sql = (
            f"SELECT ${len(self.names) + 1}::int4, each_run.* FROM ({compiled.string}) AS each_run"
        )

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        values = self.compiled.construct_params(params) or {}
        out = []
        for name in self.names:
            value = values[name]
            process = self.processors.get(name)
            out.append(value if process is None or value is None else process(value))
        return out


_PREPARED: dict[tuple[int, str, tuple[str, ...]], Prepared | None] = {}


def _prepared(
    statement: Executable, dialect: Dialect, params: Mapping[str, Any]
) -> Prepared | None:
    """The compiled form, or None when the statement must run through SQLAlchemy."""
    # an INSERT or UPDATE names the columns its parameters give (as SQLAlchemy compiles it)
    names = tuple(sorted(params)) if isinstance(statement, ValuesBase) else ()
    key = (id(statement), dialect.name, names)
    if key in _PREPARED:
        found = _PREPARED[key]
        if found is None or found.statement is statement:
            return found
    if len(_PREPARED) >= _MAX_STATEMENTS:
        return None
    if not isinstance(statement, ClauseElement):
        return None
    compiled: SQLCompiler = statement.compile(  # type: ignore[assignment]
        dialect=dialect, column_keys=list(names) or None
    )
    columns = getattr(statement, "exported_columns", ())
    fits = (
        all(isinstance(column.type, _AS_IS) for column in columns)
        # a column default computed in Python is SQLAlchemy's execution context's work
        and not compiled.insert_prefetch
        and not compiled.update_prefetch
    )
    prepared = Prepared(statement, compiled) if fits else None
    _PREPARED[key] = prepared
    return prepared


def dialect_name(db: AsyncSession | AsyncConnection) -> str:
    """The dialect ``db`` speaks ("postgresql", "sqlite"): a session's bind's, or the
    connection's."""
    return db.get_bind().dialect.name if isinstance(db, AsyncSession) else db.dialect.name


async def rows(
    db: AsyncSession | AsyncConnection,
    statement: Executable,
    params: Mapping[str, Any] | None = None,
    *,
    begin: bool = True,
    shared: Shared | None = None,
) -> Rows:
    """The rows of ``statement`` (a select, or a write with RETURNING; [] for a write
    without), run in ``db``'s transaction.

    ``begin=False``: the statement locks nothing (a plain read), so on the fast path it may
    run before the transaction's first statement, alone, without a BEGIN; the transaction
    begins with the first statement that needs it. At PostgreSQL's READ COMMITTED every
    statement sees the database as of its own start either way, so this changes no
    result, and a command its rules refuse after its reads costs no transaction at all.
    Such a read may then run with other commands' reads of the same statement, in one round
    trip on another connection (``shared``, ``db.shared_reads``): none of them locks or
    writes anything, so where it runs changes nothing either.
    """
    params = params or {}
    if isinstance(db, AsyncSession):
        if db.new or db.dirty or db.deleted:
            await db.flush()  # the session's pending objects: what its own execute flushes
        conn = await _connection_of(db)
    else:
        conn = db
    prepared = _prepared(statement, conn.dialect, params) if _fast(conn) else None
    if prepared is None:
        result = await conn.execute(statement, params)
        return result.all() if result.returns_rows else []
    if not begin:
        return await _read(conn, prepared, prepared.arguments(params), shared)
    return await _run(conn, prepared, prepared.arguments(params), begin)


class Shared(Protocol):
    """Where a read that locks nothing may run instead of on the caller's connection."""

    @property
    def dialect(self) -> Dialect: ...

    async def read(self, prepared: Prepared, args: list[Any]) -> Rows: ...


async def read_shared(
    shared: Shared, statement: Executable, params: Mapping[str, Any] | None = None
) -> Rows | None:
    """``rows`` with ``begin=False`` for a caller that holds no connection yet: the read runs
    on ``shared``; None when the statement does not take the fast path (read it on a
    connection then)."""
    params = params or {}
    dialect = shared.dialect
    prepared = _prepared(statement, dialect, params) if _fast_dialect(dialect) else None
    if prepared is None:
        return None
    return await shared.read(prepared, prepared.arguments(params))


async def read(conn: AsyncConnection, prepared: Prepared, args: list[Any]) -> Rows:
    """``prepared`` (a read) with ``args`` on ``conn``, outside any transaction it holds."""
    return await _run(conn, prepared, args, begin=False)


async def rows_each(
    conn: AsyncConnection, prepared: Prepared, arguments: Sequence[list[Any]]
) -> list[Rows]:
    """The rows of one read run once per argument list, all in one round trip (asyncpg sends
    every execution before a single sync), each list's rows apart, in order."""
    adapter = _adapter(conn)
    sql = prepared.each_sql
    tagged = [[*args, i] for i, args in enumerate(arguments)]
    try:
        async with adapter._execute_mutex:
            found = await adapter._connection.fetchmany(sql, tagged)
    except Exception as error:
        raise await _wrapped(conn, adapter, error, sql) from error
    each: list[list[Sequence[Any]]] = [[] for _ in arguments]
    for row in found:
        each[row[0]].append(row[1:])
    return list(each)


async def rows_along(
    conn: AsyncConnection | None,
    statement: Executable,
    params: Mapping[str, Any],
    along: Select[Any],
    along_params: Mapping[str, Any],
    shared: Shared | None = None,
) -> tuple[Rows, Rows] | None:
    """The rows of ``statement`` and of ``along`` (a small select of the caller's), read in
    one statement, so in one round trip and one consistent view, each as ``rows`` with
    ``begin=False`` would give them; None when they cannot go together (not the fast
    path, or a statement it does not take): then read them apart.

    For a read of the framework's that only an outcome of the game's read may need (a
    command's stored answer for its ``Idempotency-Key``, needed when the rules refuse it):
    a second statement would cost a round trip each time, most of them for nothing.
    ``conn`` None: the caller holds no connection yet, and both are read on ``shared``."""
    if conn is not None:
        dialect = conn.dialect
    elif shared is not None:
        dialect = shared.dialect
    else:
        raise ValueError("rows_along needs a connection or shared reads")
    if not _fast_dialect(dialect) or not isinstance(statement, Select | CompoundSelect):
        return None
    key = (id(statement), id(along), dialect.name)
    found = _ALONG.get(key)
    if found is None or found.statement is not statement or found.along is not along:
        # each goes together only where it would take the fast path alone
        fits = _prepared(statement, dialect, params) and _prepared(along, dialect, {})
        if not fits or len(_ALONG) >= _MAX_STATEMENTS:
            return None
        found = _ALONG[key] = _Along(statement, along, dialect)
    values = {**params, **{f"along_{name}": value for name, value in along_params.items()}}
    both = await _read(conn, found.prepared, found.prepared.arguments(values), shared)
    width = found.width
    mine = [row[:width] for row in both if row[-1] is None]
    theirs = [row[width:-1] for row in both if row[-1] is not None]
    return mine, theirs


class _Along:
    """``statement``'s rows and ``along``'s in one statement: each a subquery, in a FULL
    JOIN on false, so each row is one of theirs with NULLs for the other's columns. The
    game's are read as ``mine.*`` (its columns need no names), then ``along``'s and a marker
    set on its rows only; the game's rows keep the order its statement gives them."""

    __slots__ = ("along", "prepared", "statement", "width")

    def __init__(
        self, statement: Select[Any] | CompoundSelect[Any], along: Select[Any], dialect: Dialect
    ) -> None:
        self.statement, self.along = statement, along  # held: the cache is keyed by id()
        self.width = len(statement.selected_columns)
        marked = _renamed(along, "along_").add_columns(literal_column("1").label("along_row"))
        mine, theirs = statement.subquery("mine"), marked.subquery("along")
        joined: Select[Any, Any] = select(
            literal_column("mine.*"), literal_column("along.*")
        ).select_from(mine.outerjoin(theirs, false(), full=True))
        self.prepared = Prepared(joined, joined.compile(dialect=dialect))  # type: ignore[arg-type]


# (id of the statement, id of the one along, dialect) -> how they are read together
_ALONG: dict[tuple[int, int, str], _Along] = {}


_CONNECTION = "db.driver.connection"  # the key of ``_connection_of``'s note in ``Session.info``


async def _connection_of(session: AsyncSession) -> AsyncConnection:
    """The connection of ``session``'s transaction. The session is asked once per
    transaction (each ask crosses SQLAlchemy's greenlet bridge), then its answer is
    remembered beside the transaction it belongs to."""
    transaction = session.sync_session.get_transaction()
    noted = session.info.get(_CONNECTION)
    if transaction is not None and transaction.is_active and noted and noted[0] is transaction:
        return noted[1]  # type: ignore[no-any-return]
    conn = await session.connection()
    session.info[_CONNECTION] = (session.sync_session.get_transaction(), conn)
    return conn


def _fast(conn: AsyncConnection) -> bool:
    return _fast_dialect(conn.dialect)


def _fast_dialect(dialect: Dialect) -> bool:
    return FAST_PATH and dialect.driver == "asyncpg"


def _adapter(conn: AsyncConnection) -> Any:
    """SQLAlchemy's asyncpg adapter of ``conn`` (its ``_connection`` is asyncpg's)."""
    return conn.sync_connection.connection.dbapi_connection  # type: ignore[union-attr]


def _began(conn: AsyncConnection) -> bool:
    """Has ``conn``'s transaction sent BEGIN (its reads then see its own writes)?"""
    return _adapter(conn)._transaction is not None


async def _read(
    conn: AsyncConnection | None, prepared: Prepared, args: list[Any], shared: Shared | None
) -> Rows:
    """A read that locks nothing: with ``shared`` until ``conn``'s transaction began (or
    while there is no ``conn``), else on ``conn``."""
    if shared is not None and (conn is None or not _began(conn)):
        return await shared.read(prepared, args)
    assert conn is not None
    return await _run(conn, prepared, args, begin=False)


@asynccontextmanager
async def transaction(conn: AsyncConnection) -> AsyncIterator[None]:
    """``async with conn.begin()``, committed when the block ends and rolled back when it
    raises, without SQLAlchemy's greenlet bridge where the driver has nothing to send.

    On asyncpg the adapter sends BEGIN lazily, with the first statement that needs it
    (``rows`` with ``begin=True``), so beginning sends nothing, and a transaction that never
    sent BEGIN (a command whose rules refused it after its reads, or whose closing
    statement committed by itself) ends without a round trip too. Each crossing of the
    bridge starts a greenlet, and each greenlet maps a fresh frame stack from the kernel
    and unmaps it: two system calls and a page fault, for nothing to send. Such a
    transaction begins and ends by SQLAlchemy's own synchronous calls here (its events and
    state as ``conn.begin()`` leaves them); one that did send BEGIN ends on the bridge as
    usual. Elsewhere (SQLite) this is ``conn.begin()``."""
    if not _fast(conn):
        async with conn.begin():
            yield
        return
    adapter = _adapter(conn)
    began = conn.sync_connection.begin()  # type: ignore[union-attr]  # sends nothing: the adapter begins lazily
    began.__enter__()  # as ``conn.begin()``'s block enters it
    try:
        yield
    except BaseException as error:
        await _end(adapter, began.__exit__, type(error), error, error.__traceback__)
        raise
    await _end(adapter, began.__exit__, None, None, None)


async def _end(adapter: Any, end: Any, *exc_info: Any) -> None:
    if adapter._transaction is None:  # no BEGIN was sent: the adapter sends nothing either
        end(*exc_info)
    else:
        await greenlet_spawn(end, *exc_info)


async def _run(conn: AsyncConnection, prepared: Prepared, args: list[Any], begin: bool) -> Rows:
    adapter = _adapter(conn)
    driver = adapter._connection
    sql = prepared.compiled.string
    try:
        async with adapter._execute_mutex:
            if begin and adapter._transaction is None:
                await adapter._start_transaction()
            return await driver.fetch(sql, *args)  # type: ignore[no-any-return]
    except Exception as error:
        raise await _wrapped(conn, adapter, error, sql) from error


async def _wrapped(conn: AsyncConnection, adapter: Any, error: Exception, sql: str) -> Exception:
    """``error`` as SQLAlchemy would have raised it; a dropped connection is invalidated."""
    if isinstance(error, DBAPIError):
        return error  # raised by the adapter's own transaction start, already translated
    try:
        adapter._handle_exception(error)
    except Exception as translated:
        dbapi_error = translated
    else:  # pragma: no cover - _handle_exception always raises
        dbapi_error = error
    dialect = conn.dialect
    invalidated = bool(dialect.is_disconnect(dbapi_error, adapter, None))  # type: ignore[arg-type]
    if invalidated:
        await conn.invalidate(dbapi_error)
    return DBAPIError.instance(
        sql,
        None,
        dbapi_error,
        dialect.loaded_dbapi.Error,
        hide_parameters=True,
        dialect=dialect,
        connection_invalidated=invalidated,
    )


Write = tuple[Insert, Mapping[str, Any]]  # an INSERT of one row and its values
# a conditional write with RETURNING (an UPDATE or DELETE) that must touch a row, and its
# parameters (``write_all``'s guards)
Guard = tuple[Executable, Mapping[str, Any]]
_MAX_TOGETHER = 8  # more rows go per statement, many rows each
_Shape = tuple[tuple[int, tuple[str, ...]], ...]
_TOGETHER: dict[tuple[_Shape, _Shape], tuple[Executable, tuple[Executable, ...]]] = {}


async def write_all(
    conn: AsyncConnection,
    writes: Sequence[Write],
    guards: Sequence[Guard] = (),
    *,
    last: bool = False,
) -> bool:
    """Insert one row per ``(insert, values)``, in ``conn``'s transaction, in one round trip
    on PostgreSQL: all but the last become data-modifying CTEs of the last (PostgreSQL runs
    every one of them, whatever the main statement reads). Elsewhere, one after another.

    For the rows a command writes at its end (its events, its idempotency record), which
    nothing in the same statement needs to read back.

    ``guards`` go first: each must touch a row, or none of ``writes`` is written and the
    answer is False (on PostgreSQL in the same statement, the writes made conditional on
    the guards' RETURNING rows; elsewhere the guards run one after another): the caller
    rolls back what the guards that held wrote. True: every guard held, every row is
    written.

    ``last``: nothing but the commit follows in this transaction, so when it has written
    nothing yet the statement runs alone, without the BEGIN and COMMIT round trips (one
    statement is atomic by itself).
    """
    if not writes and not guards:
        return True
    if (
        len(writes) + len(guards) > _MAX_TOGETHER
        or not _fast(conn)
        or (len(writes) == 1 and not guards)
    ):
        for statement, params in guards:
            if not await rows(conn, statement, params):
                return False
        alone = last and len(writes) == 1 and not guards  # one statement in all
        for statement, group in groupby(writes, key=lambda w: w[0]):
            values = [v for _, v in group]
            if len(values) == 1:
                await rows(conn, statement, values[0], begin=not alone)
            else:  # one round trip per statement (SQLAlchemy's insertmanyvalues)
                await conn.execute(statement, values)
        return True
    shape = (
        tuple((id(statement), tuple(sorted(values))) for statement, values in writes),
        tuple((id(statement), tuple(sorted(params))) for statement, params in guards),
    )
    given = (*(s for s, _ in writes), *(s for s, _ in guards))
    found = _TOGETHER.get(shape)
    if found is None or any(a is not b for a, b in zip(found[1], given, strict=True)):
        found = _TOGETHER[shape] = (_together(writes, guards), given)
    params = {f"w{i}_{name}": value for i, (_, v) in enumerate(writes) for name, value in v.items()}
    params.update(
        (f"g{i}_{name}", value) for i, (_, p) in enumerate(guards) for name, value in p.items()
    )
    # two guards run side by side: one may write while the other fails, so they need the
    # transaction the caller rolls back
    held = await rows(conn, found[0], params, begin=not last or len(guards) > 1)
    return not guards or all(held[0])


def _together(writes: Sequence[Write], guards: Sequence[Guard]) -> Executable:
    """One statement: the guards as CTEs, each insert as a CTE (or the main statement,
    without guards); with guards, each insert is an INSERT ... SELECT that writes only when
    every guard returned a row, and the main statement tells which guards did."""
    held = [_renamed(statement, f"g{i}_").cte(f"g{i}") for i, (statement, _) in enumerate(guards)]
    all_held = and_(*(exists(g.select()) for g in held)) if held else None

    def one(i: int, statement: Insert, values: Mapping[str, Any]) -> Insert:
        columns = statement.table.c  # type: ignore[attr-defined]
        binds = {name: bindparam(f"w{i}_{name}", type_=columns[name].type) for name in values}
        if all_held is None:
            return statement.values(binds)
        return statement.from_select(list(binds), select(*binds.values()).where(all_held))

    if not held:
        *first, (last, last_values) = writes
        main: Executable = one(len(first), last, last_values)
    else:
        first = list(writes)
        main = select(*(exists(g.select()) for g in held))
    for i, (statement, values) in enumerate(first):
        main = main.add_cte(one(i, statement, values).cte(f"w{i}"))  # type: ignore[attr-defined]
    return main


def _renamed(statement: Any, prefix: str) -> Any:
    """``statement`` with each named parameter renamed ``prefix`` + name (two guards may
    be the same statement)."""

    def rename(element: Any, **_: Any) -> Any:
        if isinstance(element, BindParameter) and not element.unique:
            return bindparam(prefix + element.key, type_=element.type)
        return None

    return replacement_traverse(statement, {}, rename)
