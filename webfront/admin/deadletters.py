"""Requeue or drop a dead event: the console's adapter to ``common.queue.deadletters``.

The queue's functions do the work the CLI's ``wgctl queue requeue``/``drop`` do: a
requeued event runs again in its place in its village's order; a dropped one runs
its kind's compensation (from the game's handler registry, which the web tier
loads too) in the transaction that deletes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from common.queue import deadletters
from gameapi.stocks import stocks_of
from webfront.state import EVENT_KINDS, GAME, QUEUE, SESSION_FACTORY, SETTINGS


@dataclass(frozen=True)
class Outcome:
    done: bool
    reason: str  # what happened, for the answer and the audit log


async def requeue(app: web.Application, event_id: int) -> Outcome:
    outcome = await deadletters.requeue(app[QUEUE], app[SESSION_FACTORY], [event_id])
    if not outcome.done:
        return Outcome(False, "not a dead event")
    return Outcome(True, "requeued: it runs now, in its village's order")


async def drop(app: web.Application, event_id: int) -> Outcome:
    outcome = await deadletters.drop(
        app[QUEUE],
        app[SESSION_FACTORY],
        app[EVENT_KINDS],
        [event_id],
        stocks=stocks_of(app[GAME]),
        world_speed=app[SETTINGS].world_speed,
    )
    if not outcome.done:
        return Outcome(False, "not a dead event")
    return Outcome(True, "dropped: its compensation ran (what its command took is given back)")
