"""A sequential, in-process executor of the game's durable events, for rule tests.

It is the same contract the task server keeps (events run by (due, priority,
id); the event row is deleted in the transaction that applies its effects),
without Redis, so game rules can be tested on their own against a real DB.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgpack
from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.clock import ManualClock
from common.ids import IdGenerator
from db.engine import session_factory
from db.models import ScheduledEvent
from refgame.handlers import HANDLERS


class DriverTx:
    def __init__(self, session: AsyncSession, now_ms: int, world_speed: float, ids: IdGenerator):
        self.session = session
        self.now_ms = now_ms
        self.world_speed = world_speed
        self.ids = ids
        self.pending: list[dict[str, Any]] = []
        self.touched: set[int] = set()
        self.alerts: list[tuple[int, str, Any]] = []

    def schedule(self, kind: str, village_id: int, due_ms: int, payload: dict[str, Any]) -> int:
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

    async def cancel(self, event_id: int) -> bool:
        result = await self.session.execute(
            delete(ScheduledEvent).where(ScheduledEvent.id == event_id)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def flush(self) -> None:
        if self.pending:
            await self.session.execute(insert(ScheduledEvent), self.pending)
            self.pending.clear()


class GameDriver:
    def __init__(self, engine: AsyncEngine, clock: ManualClock, world_speed: float = 1.0) -> None:
        self.sessions = session_factory(engine)
        self.clock = clock
        self.world_speed = world_speed
        self.ids = IdGenerator(clock)
        self.events_run: list[tuple[str, int, int]] = []
        self.alerts: list[tuple[int, str, Any]] = []  # of committed commands

    async def command(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        async with self.sessions() as session, session.begin():
            tx = DriverTx(session, self.clock.now_ms(), self.world_speed, self.ids)
            result = await fn(tx, *args)
            await tx.flush()
        self.alerts.extend(tx.alerts)
        return result

    async def run_until(self, until_ms: int) -> int:
        """Run every event due up to ``until_ms`` in order, moving the clock along."""
        count = 0
        while True:
            async with self.sessions() as session, session.begin():
                row = (
                    await session.execute(
                        select(ScheduledEvent)
                        .where(ScheduledEvent.due_ms <= until_ms)
                        .order_by(ScheduledEvent.due_ms, ScheduledEvent.priority, ScheduledEvent.id)
                        .limit(1)
                    )
                ).scalar_one_or_none()
                if row is None:
                    break
                if row.due_ms > self.clock.now_ms():
                    await self.clock.set(row.due_ms)
                await session.execute(delete(ScheduledEvent).where(ScheduledEvent.id == row.id))
                tx = DriverTx(session, self.clock.now_ms(), self.world_speed, self.ids)
                await HANDLERS[row.kind](
                    tx, row.village_id, row.due_ms, msgpack.unpackb(row.payload)
                )
                await tx.flush()
                self.events_run.append((row.kind, row.village_id, row.due_ms))
                count += 1
        if until_ms > self.clock.now_ms():
            await self.clock.set(until_ms)
        return count
