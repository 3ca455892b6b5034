"""Engine and session factory for PostgreSQL (asyncpg) and SQLite (aiosqlite, WAL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import orjson
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from common.errors import UnreachableError
from common.settings import Settings


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the web tier read while the task server writes; NORMAL sync is
    # durable across process crashes (only an OS crash can lose the last commits).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def closed_by_server(dbapi_connection: Any) -> bool:
    """Whether the server closed this connection (a restart, an idle timeout), as its driver
    knows without a round trip: asyncpg does; a driver that cannot tell says False."""
    is_closed = getattr(getattr(dbapi_connection, "driver_connection", None), "is_closed", None)
    return bool(is_closed is not None and is_closed())


def _drop_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    # A connection the server closed is replaced by the pool instead of handed out. This is
    # why the pool has no pre-ping, which costs three round trips per checkout (BEGIN, ping,
    # ROLLBACK); what this misses (a connection that died silently) fails as an outage,
    # which callers retry (a command once, a batch returns to due) or answer 503.
    if closed_by_server(dbapi_connection):
        raise DisconnectionError("the server closed this connection")


def json_dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def create_engine(settings: Settings, **kwargs: Any) -> AsyncEngine:
    # an error's text (logged by the tiers) never carries the bound values: password
    # hashes, session token hashes
    kwargs.setdefault("hide_parameters", True)
    # JSON columns (a game's report bodies, payload-like rows) are written per event: orjson
    # serializes them much faster than the json module
    kwargs.setdefault("json_serializer", json_dumps)
    kwargs.setdefault("json_deserializer", orjson.loads)
    url = make_url(settings.database_url)
    if settings.is_sqlite:
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    # asyncpg's pool replaces a closed connection at checkout (``_drop_closed``); another
    # driver's pool pings at checkout instead
    kwargs.setdefault("pool_pre_ping", url.get_driver_name() != "asyncpg")
    if url.get_driver_name() == "asyncpg":
        kwargs["connect_args"] = asyncpg_connect_args(kwargs.get("connect_args", {}))
    engine = create_async_engine(url, **kwargs)
    if url.get_driver_name() == "asyncpg":
        event.listen(engine.sync_engine.pool, "checkout", _drop_closed)
    return engine


def asyncpg_connect_args(given: dict[str, Any]) -> dict[str, Any]:
    """asyncpg's connection arguments for a game's statements: short reads and writes of a
    few rows, each run many times."""
    return {
        # A statement longer than asyncpg caches by default (15 KiB; a game's snapshot
        # statement is) would be parsed and planned anew on every run.
        "max_cacheable_statement_size": 1 << 20,
        **given,
        # PostgreSQL compiles a statement to machine code (JIT) when its estimated cost
        # passes a threshold, and a batch read whose estimates lag behind the world passes
        # it: compiling then costs a hundred times the read.
        "server_settings": {"jit": "off", **given.get("server_settings", {})},
    }


# SQLSTATE classes of a database that is down, starting or stopping, not of a bad statement:
# 08 connection exception, 57 operator intervention (57P01 admin shutdown, 57P03 cannot
# connect now: "the database system is not yet accepting connections").
_OUTAGE_SQLSTATE_CLASSES = frozenset({"08", "57"})
# A transaction that lost to another one and was rolled back: run it again as it was.
# 40001 serialization failure, 40P01 deadlock detected, 55P03 lock not available.
_CONFLICT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})


def _sqlstate(exc: BaseException) -> str:
    """The SQLSTATE of a driver error, raw (asyncpg, used directly on hot paths) or wrapped
    by SQLAlchemy; '' when there is none."""
    for error in (exc, getattr(exc, "orig", None)):
        state = getattr(error, "sqlstate", None)
        if state:
            return str(state)
    return ""


def is_database_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the database is unreachable or restarting (retry later),
    rather than that a statement was wrong."""
    if isinstance(exc, DBAPIError) and (
        exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)
    ):
        return True
    if isinstance(exc, asyncpg.exceptions.InterfaceError | asyncpg.PostgresConnectionError):
        return True  # raw asyncpg: the connection closed or broke under the statement
    return _sqlstate(exc)[:2] in _OUTAGE_SQLSTATE_CLASSES


def is_transaction_conflict(exc: BaseException) -> bool:
    """True when the transaction was rolled back because it lost to another one (a deadlock,
    a serialization failure, a lock it could not take): nothing was wrong with it, and it
    succeeds when run again."""
    if _sqlstate(exc) in _CONFLICT_SQLSTATES:
        return True
    return isinstance(exc, OperationalError) and "database is locked" in str(exc.orig)


# 23505 unique violation, 23503 foreign key violation
_RACE_SQLSTATES = frozenset({"23505", "23503"})
_RACE_SQLITE = ("UNIQUE constraint failed", "FOREIGN KEY constraint failed")


def is_constraint_race(exc: BaseException) -> bool:
    """True when a unique or foreign-key constraint refused a write: of a command that
    checked first, it means a concurrent one committed the row (or removed the parent)
    between the check and the write, so run again, the check sees it."""
    if not isinstance(exc, IntegrityError):
        return False
    if _sqlstate(exc) in _RACE_SQLSTATES:
        return True
    return str(exc.orig).startswith(_RACE_SQLITE)


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


def bound_engine(sessions: async_sessionmaker[AsyncSession] | None) -> AsyncEngine | None:
    """The engine ``sessions`` are bound to (None: no sessions, or bound otherwise)."""
    bind = None if sessions is None else sessions.kw.get("bind")
    return bind if isinstance(bind, AsyncEngine) else None


async def check_database(engine: AsyncEngine) -> None:
    """Raise UnreachableError (naming DATABASE_URL) unless the database answers."""
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        url = engine.url.render_as_string(hide_password=True)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UnreachableError(f"DATABASE_URL: cannot connect to {url}: {reason}") from None
