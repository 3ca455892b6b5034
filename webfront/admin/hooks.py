"""What a game adds to the console: two optional fields of its ``Game``.

The console reads the framework's tables itself (players, villages, events) and asks
the game for the rest::

    async def admin_timeline(session, village_id) -> dict[str, list[dict]]
        # the game's rows about a village (orders, marches, ...), one list per section,
        # each row a JSON-ready dict (with a "kind" and a time in ms where it has one)
    async def replay_report(session, report_id) -> dict | None
        # None: no such report; else {"equal": bool, "stored": ..., "replayed": ...}
        # (a report that is not a replayable battle: {"equal": None, "reason": ...})

so the framework never names a game table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from gameapi.loading import load_game

Timeline = Callable[[AsyncSession, int], Awaitable[dict[str, list[dict[str, Any]]]]]
Replay = Callable[[AsyncSession, int], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class GameHooks:
    timeline: Timeline | None = None
    replay: Replay | None = None


def load_hooks(game: str) -> GameHooks:
    loaded = load_game(game)
    return GameHooks(timeline=loaded.admin_timeline, replay=loaded.replay_report)
