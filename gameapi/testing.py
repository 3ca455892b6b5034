"""Test helpers for games: run commands and timed events in one process, on a real database.

``GameDriver`` keeps the task server's contract without Redis or a worker:
events run one at a time in (due, priority, id) order, each in the
transaction that deletes its ``scheduled_events`` row and records it as
processed, through the handlers the game registers; the clock is a
``ManualClock`` that jumps to each due time. Game rules can so be tested on
their own against SQLite or PostgreSQL::

    driver = GameDriver(load_game("examples.harvest"), engine, ManualClock(T0))
    await driver.command(sow, player_id, SowBody(village_id=v))
    await driver.run_until(T0 + 60_000)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue.durable import add_durable_events, record_processed, row_to_event
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx, WorldShape
from common.settings import Settings, load_settings
from db.engine import session_factory
from db.models import ScheduledEvent
from gameapi.game import Game
from gameapi.loading import handler_registry
from gameapi.stocks import stocks_of

__all__ = ["GameDriver", "ManualClock", "commit_events", "game_tx"]


def game_tx(
    session: AsyncSession,
    now_ms: int,
    game: Game,
    *,
    ids: IdGenerator | None = None,
    world_speed: float = 1.0,
    player_id: int | None = None,
    registry: HandlerRegistry | None = None,
    world: WorldShape | None = None,
) -> Tx:
    """A ``Tx`` of ``game`` on ``session``, as the web tier or the task server makes it."""
    return Tx(
        session,
        now_ms,
        world_speed,
        ids or IdGenerator(ManualClock(now_ms)),
        kinds=registry,
        player_id=player_id,
        stocks=stocks_of(game),
        world=world,
    )


async def commit_events(tx: Tx) -> None:
    """Write what ``tx`` kept for the commit (``Tx.write_at_commit``, ``require_at_commit``)
    and the events it scheduled, as durable rows (call before the commit)."""
    await tx.write_kept()
    if tx.events:
        await add_durable_events(tx.session, tx.events, ids=tx.ids)
        tx.events.clear()


class GameDriver:
    """A sequential, in-process executor of a game's commands and durable events."""

    def __init__(
        self,
        game: Game,
        engine: AsyncEngine,
        clock: ManualClock,
        *,
        world_speed: float = 1.0,
        settings: Settings | None = None,
    ) -> None:
        self.game = game
        self.sessions = session_factory(engine)
        self.clock = clock
        self.world_speed = world_speed
        settings = settings or load_settings(world_speed=world_speed)
        self.registry = handler_registry(game, settings)
        self.world = WorldShape(settings.map_radius, settings.tick_shards)
        self.ids = IdGenerator(clock)
        self.events_run: list[tuple[str, int, int]] = []  # (kind, place id, due ms)
        self.alerts: list[tuple[int, str, Any]] = []  # (player, kind, data) of committed commands

    def _tx(self, session: AsyncSession, player_id: int | None = None) -> Tx:
        return game_tx(
            session,
            self.clock.now_ms(),
            self.game,
            ids=self.ids,
            world_speed=self.world_speed,
            player_id=player_id,
            registry=self.registry,
            world=self.world,
        )

    async def command(
        self, fn: Callable[..., Awaitable[Any]], player_id: int | None, *args: Any
    ) -> Any:
        """Run ``fn(tx, player_id, *args)`` (a command handler) in one transaction."""
        async with self.sessions() as session, session.begin():
            tx = self._tx(session, player_id)
            result = await fn(tx, player_id, *args)
            await commit_events(tx)
        self.alerts.extend(tx.alerts)
        return result

    async def run_until(self, until_ms: int) -> int:
        """Run every event due up to ``until_ms`` in order, moving the clock along."""
        count = 0
        while True:
            async with self.sessions() as session, session.begin():
                row = await session.scalar(
                    select(ScheduledEvent)
                    .where(ScheduledEvent.due_ms <= until_ms)
                    .order_by(ScheduledEvent.due_ms, ScheduledEvent.priority, ScheduledEvent.id)
                    .limit(1)
                )
                if row is None:
                    break
                if row.due_ms > self.clock.now_ms():
                    await self.clock.set(row.due_ms)
                event = row_to_event(row)
                registration = self.registry.get(event.kind)
                if registration is None:
                    raise LookupError(f"no handler for event kind {event.kind!r}")
                await session.execute(delete(ScheduledEvent).where(ScheduledEvent.id == row.id))
                await record_processed(session, [event], self.clock.now_ms())
                tx = self._tx(session)
                await registration.handler(tx, [event])
                await commit_events(tx)
                self.events_run.append((event.kind, event.village_id, event.due_ms))
                count += 1
        if until_ms > self.clock.now_ms():
            await self.clock.set(until_ms)
        return count
