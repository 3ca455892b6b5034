"""A game's workload for ``python -m bench queue --handlers game`` (``Game.bench``).

The bench generates a world of the game's bot places (``new_place(speed, True)``),
then asks the game to set up ``events`` timed events of one kind, all due at the
same moment, and measures how fast the task server runs them beside durable
no-op events on the same database. The game writes its rows and schedules the
events with ``tx.schedule`` as its own command would; the bench commits them,
indexes them in the queue and, after the run, checks ``counts``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from common.queue.tx import Tx


@dataclass(frozen=True)
class GameBench:
    """``kind``: the event kind measured (refgame ``"march"``). ``prepare(tx,
    place_ids, events, due_ms)``: write the game's rows for ``events`` events of
    ``kind`` due at ``due_ms`` between the generated places ``place_ids`` and
    schedule them through ``tx.schedule`` (one transaction; raise
    ``ValueError`` with a one-line reason when the places cannot carry that many).
    ``counts(conn)``: what the run produced in the game's tables (e.g. reports,
    return trips), for the bench's correctness check and its JSON."""

    kind: str
    prepare: Callable[[Tx, Sequence[int], int, int], Awaitable[None]]
    counts: Callable[[AsyncConnection], Awaitable[dict[str, int]]]
