"""The unit of work after a game transaction commits: index, tidy, call back, bump, alert.

The web tier (one command) and the task server (a batch of events) both
collect what their committed transactions left to do in a ``Committed`` and
call ``finish`` once. Failures here are logged, never raised: the commit is
the truth, the reconciler indexes any event Redis missed, and a stale
snapshot is rebuilt at the next bump.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from common.snapshot_versions import (
    ScriptRunner,
    bump_versions,
    bump_versions_on,
    publish_alerts,
)

if TYPE_CHECKING:
    from common.queue.eventqueue import EventQueue
    from common.queue.events import Event
    from common.queue.tx import Tx

log = logging.getLogger("common.queue.work")


@dataclass
class Committed:
    events: list[Event] = field(default_factory=list)
    cancelled: list[tuple[int, int]] = field(default_factory=list)
    players: set[int] = field(default_factory=set)
    callbacks: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    alerts: list[tuple[int, str, Any]] = field(default_factory=list)  # (player, kind, data)

    def add(self, tx: Tx, events: list[Event]) -> None:
        """``tx`` committed, with ``events`` its durable events as written."""
        self.events.extend(events)
        self.cancelled.extend(tx.cancelled)
        self.players.update(tx.touched)
        if tx.player_id is not None:
            self.players.add(tx.player_id)
        self.callbacks.extend(tx.callbacks)
        self.alerts.extend(tx.alerts)

    def __bool__(self) -> bool:
        return bool(self.events or self.cancelled or self.players or self.callbacks or self.alerts)

    async def finish(
        self, queue: EventQueue, now_ms: int, where: str, fast: ScriptRunner | None = None
    ) -> None:
        """Index the events, tidy cancelled ones, run callbacks, bump snapshot versions (each
        bump is pushed to the players' open streams), then push the alerts.

        With ``fast`` (the web tier's pipelined connection to the queue's Redis) and
        nothing to cancel or call back, the index and the bump go out together on it: a
        command then waits for one round trip, not two, and pays no redis-py call.
        """
        if fast is not None and not self.cancelled and not self.callbacks:
            await asyncio.gather(
                self._index(queue, where, fast), self._bump(queue, now_ms, where, fast)
            )
            return
        await self._index(queue, where)
        for callback in self.callbacks:
            try:
                await callback()
            except Exception:
                log.exception("%s: an after-commit callback failed", where)
        await self._bump(queue, now_ms, where, fast)

    async def _index(self, queue: EventQueue, where: str, fast: ScriptRunner | None = None) -> None:
        try:
            if self.events and fast is not None:
                await queue.index_on(fast, self.events)
            elif self.events:
                await queue.index(self.events)
            for place_id, event_id in self.cancelled:
                await queue.cancel(place_id, event_id)
        except Exception as exc:
            log.warning("%s: indexing events failed (%s); the reconciler will", where, exc)

    async def _bump(
        self, queue: EventQueue, now_ms: int, where: str, fast: ScriptRunner | None
    ) -> None:
        if self.players:
            try:
                if fast is not None:
                    await bump_versions_on(fast, queue.prefix, self.players, now_ms)
                else:
                    await bump_versions(queue.redis, queue.prefix, self.players, now_ms)  # type: ignore[arg-type]
            except Exception as exc:
                log.warning("%s: bumping snapshot versions failed: %s", where, exc)
        if self.alerts:
            try:
                await publish_alerts(queue.redis, queue.prefix, self.alerts)  # type: ignore[arg-type]
            except Exception as exc:
                log.warning("%s: publishing alerts failed: %s", where, exc)
