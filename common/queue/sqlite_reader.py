"""The worker's village-order reads on SQLite, on the event loop's own thread.

aiosqlite runs every statement on a thread of its own connection: a read costs a few
hand-offs between threads, each of which waits for the GIL (and, on a busy host, for a
CPU). The order check of a claimed batch is a handful of index probes, done in C in less
time than one hand-off, so the worker reads through a plain ``sqlite3`` connection of its
own instead. WAL mode lets it read while others write, without waiting; a read that
cannot go ahead at once (``SQLITE_BUSY``, a missing file) returns None and the caller asks
through its session as before.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.queue.durable import earlier_in_villages_sqlite
from common.queue.events import Event
from db.engine import bound_engine
from db.events import PendingHead, earliest_pending_sqlite

log = logging.getLogger(__name__)


class SqliteReader:
    """A read-only ``sqlite3`` connection to the world's database file (autocommit: each
    read sees every transaction committed before it, and holds no snapshot after it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def for_sessions(cls, sessions: async_sessionmaker[AsyncSession] | None) -> SqliteReader | None:
        """A reader of the file ``sessions`` work on, or None (not SQLite, or in memory)."""
        engine = bound_engine(sessions)
        url = None if engine is None else engine.url
        if url is None or url.get_backend_name() != "sqlite":
            return None
        path = url.database
        if not path or path == ":memory:" or path.startswith("file:"):
            return None
        return cls(path)

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                conn.execute("PRAGMA query_only=1")
                conn.execute("PRAGMA busy_timeout=0")  # never block the event loop
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def warm(self) -> None:
        """Open the connection and prepare the probe before the first claim, so that the
        first batch after an idle start does not pay for it (a failure waits for then)."""
        try:
            earlier_in_villages_sqlite(self._connect(), [Event(0, "", 0, 0, 0, {}, 0, False)])
        except sqlite3.Error:
            self.close()

    def order(
        self, events: Sequence[Event], lookahead: bool
    ) -> tuple[PendingHead | None, dict[int, Event]] | None:
        """(the earliest healthy pending event if ``lookahead``, the first earlier event per
        village: ``durable.earlier_in_villages``), or None if SQLite could not answer now."""
        try:
            conn = self._connect()
            head = earliest_pending_sqlite(conn) if lookahead else None
            return head, earlier_in_villages_sqlite(conn, events)
        except sqlite3.Error as exc:
            log.debug("village order read on %s failed (%s); asking the session", self.path, exc)
            self.close()  # a fresh connection next time
            return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
