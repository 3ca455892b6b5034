"""``DriverTx``: a bare transaction for the reference game's lowest-level rule tests, whose
events are inspected as rows before they are written (``pending``).

Games test their commands and events with ``gameapi.testing.GameDriver``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgpack
from sqlalchemy import delete, insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from common.ids import IdGenerator
from common.queue.tx import StaleRead
from db.driver import Guard, Rows, Write, dialect_name, rows, write_all
from db.models import ScheduledEvent


class DriverTx:
    def __init__(self, session: AsyncSession, now_ms: int, world_speed: float, ids: IdGenerator):
        self.session = session
        self.now_ms = now_ms
        self.world_speed = world_speed
        self.ids = ids
        self.pending: list[dict[str, Any]] = []
        self.touched: set[int] = set()
        self.alerts: list[tuple[int, str, Any]] = []
        self.kept_writes: list[Write] = []
        self.kept_guards: list[Guard] = []

    def schedule(
        self,
        kind: str,
        village_id: int,
        due_ms: int,
        payload: dict[str, Any],
        *,
        event_id: int | None = None,
    ) -> int:
        if event_id is None:
            event_id = self.ids.next_id()
        self.pending.append(
            {"id": event_id, "kind": kind, "village_id": village_id, "due_ms": due_ms,
             "priority": 0, "payload": msgpack.packb(payload), "created_ms": self.now_ms}
        )  # fmt: skip
        return event_id

    def touch_players(self, player_ids: Iterable[int | None]) -> None:
        self.touched.update(p for p in player_ids if p is not None)

    def alert(self, player_id: int, kind: str, data: dict[str, Any] | None = None) -> None:
        self.alerts.append((player_id, kind, data or {}))

    async def connection(self) -> AsyncConnection:
        return await self.session.connection()

    @property
    def dialect(self) -> str:
        return dialect_name(self.session)

    async def rows(self, statement: Any, params: Mapping[str, Any] | None = None) -> Rows:
        return await rows(self.session, statement, params)

    async def read(self, statement: Any, params: Mapping[str, Any] | None = None) -> Rows:
        return await rows(self.session, statement, params, begin=False)

    async def cancel(self, event_id: int) -> bool:
        result = await self.session.execute(
            delete(ScheduledEvent).where(ScheduledEvent.id == event_id)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def write_at_commit(self, insert: Any, values: Mapping[str, Any]) -> None:
        self.kept_writes.append((insert, values))

    def require_at_commit(self, statement: Any, params: Mapping[str, Any]) -> None:
        self.kept_guards.append((statement, params))

    async def flush(self) -> None:
        """Write what was kept for the commit (as ``Tx.write_kept``) and the events."""
        writes, guards = self.kept_writes, self.kept_guards
        self.kept_writes, self.kept_guards = [], []
        if not await write_all(await self.connection(), writes, guards):
            raise StaleRead("a requirement kept for the commit touched no row")
        if self.pending:
            await self.session.execute(insert(ScheduledEvent), self.pending)
            self.pending.clear()
