"""``Tx``: the one transaction object a game's commands and event handlers work with.

A command's ``Tx`` is the web tier's transaction for one player request; a
handler's is the task server's transaction for a batch of events. Both commit
the game's rows, the events it scheduled (durable ``scheduled_events`` rows)
and the framework's records together; after the commit ``common.queue.work``
indexes the events in Redis, tidies cancelled ones, runs ``after_commit``
callbacks, bumps the snapshot versions of the touched players and pushes alerts.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Container, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession

from common.queue.errors import ScheduleError
from common.queue.events import NewEvent
from db import driver
from db.models import ScheduledEvent

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sqlalchemy import Insert, Select
    from sqlalchemy.ext.asyncio import AsyncConnection
    from sqlalchemy.sql import Executable

    from common.ids import IdGenerator
    from db.command_transaction import CommandTransaction
    from db.shared_writes import SharedWrites
    from db.stock import Stocks


class UnknownEventKind(ScheduleError):
    """An event of a kind no handler of the loaded game runs: refused when scheduled."""


class StaleRead(Exception):
    """A requirement kept for the commit (``Tx.require_at_commit``) touched no row: the world
    changed since the work read it. Nothing of the work was written; the caller rolls back
    and runs it again from the start (the web tier does, a few times), so its rules judge
    what is there now."""


@dataclass(frozen=True)
class WorldShape:
    """What a new place must fit: the map spans -map_radius..map_radius on x and y, and
    places are ticked in ``tick_shards`` shards (place id mod shards)."""

    map_radius: int
    tick_shards: int


class Tx:
    """A game transaction.

    ``session``: the AsyncSession of the transaction (a command's is made on first use, in
    its ``command`` transaction, ``db.command_transaction``: a command whose statements all
    go through ``rows``, ``read`` and ``Stocks`` never pays for one, and one that only
    reads takes no connection of its own). ``stocks``: the game's stock
    statements (settle, spend, deposit, rates). ``now_ms``: the time the
    work happens at (a command's arrival, an event's run). ``player_id``: the
    commanding player (None in handlers). ``kinds``: the event kinds the loaded
    game handles (None: not checked, e.g. the queue's own tests). ``world``: the map and
    tick shape a new place needs (``gameapi.found_place``; None: places cannot be founded).
    """

    __slots__ = (
        "_along",
        "_command",
        "_session",
        "_shared",
        "_shared_writes",
        "_stocks",
        "alerts",
        "along_rows",
        "callbacks",
        "cancelled",
        "events",
        "ids",
        "kept_guards",
        "kept_writes",
        "kinds",
        "now_ms",
        "player_id",
        "touched",
        "world",
        "world_speed",
    )

    def __init__(
        self,
        session: AsyncSession | None,
        now_ms: int,
        world_speed: float,
        ids: IdGenerator,
        *,
        kinds: Container[str] | None = None,
        player_id: int | None = None,
        stocks: Stocks | None = None,
        world: WorldShape | None = None,
        command: CommandTransaction | None = None,
        shared_reads: driver.Shared | None = None,
        shared_writes: SharedWrites | None = None,
    ) -> None:
        self._session = session
        self._command = command  # a command's transaction (its connection taken on need)
        self.world = world
        self.now_ms = now_ms
        self.world_speed = world_speed
        self.ids = ids
        self.kinds = kinds
        self.player_id = player_id
        self._stocks = stocks
        self.events: list[NewEvent] = []
        self.cancelled: list[tuple[int, int]] = []  # (place id, event id)
        self.touched: set[int] = set()
        self.callbacks: list[Callable[[], Awaitable[None]]] = []
        self.alerts: list[tuple[int, str, Any]] = []
        self.kept_writes: list[driver.Write] = []
        self.kept_guards: list[driver.Guard] = []
        self._shared = shared_reads  # where a read before BEGIN may run (a command's)
        self._shared_writes = shared_writes  # where a closing statement alone may run
        self._along: tuple[Select[Any], Mapping[str, Any]] | None = None
        self.along_rows: driver.Rows | None = None

    @property
    def session(self) -> AsyncSession:
        if self._session is None and self._command is not None:
            # in the command's transaction: it commits or rolls back with everything else
            self._session = self._command.session()
        if self._session is None:
            raise RuntimeError(
                "this handler was registered with durable=False and has no DB session; "
                "register it with durable=True to use tx.session"
            )
        return self._session

    @property
    def stocks(self) -> Stocks:
        """The loaded game's stock statements (``gameapi.Stocks``, from its resources)."""
        if self._stocks is None:
            raise RuntimeError("this transaction was made without the game's stocks")
        return self._stocks

    @property
    def has_session(self) -> bool:
        return self._session is not None or self._command is not None

    @property
    def dialect(self) -> str:
        """The database's dialect name ("postgresql", "sqlite"), known without taking a
        connection (a command takes one only when a statement needs it)."""
        if self._command is not None:
            return self._command.dialect.name
        return driver.dialect_name(self.session)

    async def connection(self) -> AsyncConnection:
        """The transaction's Core connection (for ``Stocks`` and ``db.driver``), with the
        session's pending ORM objects written first, so a statement on it sees them."""
        await self.flush()
        if self._command is not None:
            return await self._command.connection()
        return await self.session.connection()

    async def flush(self) -> None:
        """Write the session's pending ORM objects (before a command commits)."""
        session = self._session
        if session is not None and (session.new or session.dirty or session.deleted):
            await session.flush()

    async def rows(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> driver.Rows:
        """The rows of a Core ``statement`` (a select, or a write with RETURNING; [] for a
        write without) run in this transaction, as plain sequences (index or unpack them).

        For the statements a command runs every time: built once (at import), they skip
        SQLAlchemy's execution layers on PostgreSQL (``db.driver``); elsewhere, and for
        what the fast path does not take, ``session.execute`` runs them.
        """
        return await driver.rows(await self.connection(), statement, params)

    async def read(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> driver.Rows:
        """``rows`` for a read that locks nothing (no FOR UPDATE): it may run before the
        transaction begins, so a command whose rules refuse it after its reads costs no
        transaction (``db.driver.rows``, ``begin=False``); until then a command's may run
        with other commands' reads of the same statement (``db.shared_reads``)."""
        # with a session, ORM writes may be pending in it: read on the transaction's own
        shared = self._shared if self._session is None else None
        command = self._command
        conn: AsyncConnection | None = None  # a command that holds none yet takes none
        if shared is None or command is None or command.holds_connection:
            conn = await self.connection()
        along, self._along = self._along, None
        if along is not None and along[0] is not statement:
            both = await driver.rows_along(conn, statement, params or {}, *along, shared)
            if both is not None:
                mine, self.along_rows = both
                return mine
        if conn is None:
            assert shared is not None
            read = await driver.read_shared(shared, statement, params)
            if read is not None:
                return read
            conn = await self.connection()  # a statement the shared reads do not take
        return await driver.rows(conn, statement, params, begin=False, shared=shared)

    def read_along(self, statement: Select[Any], params: Mapping[str, Any]) -> None:
        """Read ``statement`` (the framework's) in the same statement as the handler's first
        ``read``, where the driver can (``db.driver.rows_along``): its rows are
        ``along_rows`` then, and stay None when no read took it along."""
        self._along = (statement, params)

    def write_at_commit(self, insert: Insert, values: Mapping[str, Any]) -> None:
        """Insert one row at the commit, in the closing statement that also writes the
        events and the command's idempotency record (one round trip on PostgreSQL; none
        of BEGIN and COMMIT when the command wrote nothing before it). For a row nothing
        in this transaction reads back: give its id yourself (``tx.ids.next_id()``)."""
        self.kept_writes.append((insert, values))

    def require_at_commit(self, statement: Executable, params: Mapping[str, Any]) -> None:
        """Run ``statement`` (a conditional UPDATE or DELETE with RETURNING, e.g.
        ``Stocks.spend_at``) in the closing statement; if it touches no row, nothing of
        the work is written and ``StaleRead`` is raised. For a write that only confirms
        what the work read (the stock it judged a cost against is still there)."""
        self.kept_guards.append((statement, params))

    async def write_kept(self, writes: Sequence[driver.Write] = ()) -> None:
        """Write what was kept for the commit (``write_at_commit``, ``require_at_commit``)
        and ``writes``, as one statement on PostgreSQL; call it last, just before the
        commit. Raises ``StaleRead`` (nothing written; roll back) when a requirement
        touched no row. A command that wrote nothing before it hands it to
        ``shared_writes``, which writes it with other commands' (``db.shared_writes``)."""
        writes = [*self.kept_writes, *writes]
        guards, self.kept_writes, self.kept_guards = self.kept_guards, [], []
        if not writes and not guards:
            return  # not even the connection is asked for
        shared, command = self._shared_writes, self._command
        if (
            shared is not None
            and command is not None
            and not command.holds_connection  # it wrote nothing before: this is all of it
            and shared.takes(guards)
        ):
            held = await shared.write(writes, guards)  # with other commands' closings
        else:
            held = await driver.write_all(await self.connection(), writes, guards, last=True)
        if not held:
            raise StaleRead("the world changed since this work read it; run it again")

    def schedule(
        self,
        kind: str,
        place_id: int,
        due_ms: int,
        payload: dict[str, Any] | None = None,
        *,
        priority: int = 0,
        event_id: int | None = None,
    ) -> int:
        """A timed event, committed with this transaction; returns its id: ``event_id``
        when given (drawn from ``tx.ids.next_id()`` earlier, for a row written before the
        event that names it), else a new one.

        Raises ``UnknownEventKind`` at once for a kind the game has no handler
        for: it could never run.
        """
        if self.kinds is not None and kind not in self.kinds:
            raise UnknownEventKind(
                f"no handler is registered for event kind {kind[:64]!r}; register one in "
                "the game's register_handlers"
            )
        if event_id is None:
            event_id = self.ids.next_id()
        self.events.append(
            NewEvent(kind, place_id, due_ms, dict(payload or {}), priority=priority, id=event_id)
        )
        return event_id

    async def cancel(self, event_id: int) -> bool:
        """Cancel a pending durable event in this transaction; False if it already ran."""
        deleted = await self.session.execute(
            delete(ScheduledEvent)
            .where(ScheduledEvent.id == event_id)
            .returning(ScheduledEvent.village_id)
        )
        place_id = deleted.scalar_one_or_none()
        if place_id is None:
            return False
        self.cancelled.append((place_id, event_id))
        return True

    def touch_players(self, player_ids: Iterable[int | None]) -> None:
        """These players' snapshots change too (e.g. the target of an attack)."""
        self.touched.update(p for p in player_ids if p is not None)

    def after_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` once the transaction committed; a failure is logged only:
        the committed rows are the truth."""
        self.callbacks.append(callback)

    def alert(self, player_id: int, kind: str, data: dict[str, Any] | None = None) -> None:
        """Tell ``player_id``'s open clients ``kind`` (e.g. ``"incoming_attack"``) with
        ``data`` (JSON) once the transaction committed; dropped on a rollback. Pushed on the
        player's event stream (``GET /api/events``, event ``alert``), not stored: a client
        that is not connected misses it, so whatever it must see belongs in the snapshot."""
        if not kind or len(kind) > 64:
            raise ValueError("an alert kind is 1 to 64 characters")
        json.dumps(data)  # not JSON: fail in the game's code, not after the commit
        self.alerts.append((player_id, kind, data or {}))
