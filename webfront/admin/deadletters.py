"""Requeue or drop a dead event: the one adapter the console calls.

It does what ``wgctl queue requeue`` / ``drop`` do (``common.queue.cli``): a durable
event's row is revived before its Redis entry moves back to *due* (a worker runs a
dead row's event to no effect), and dropped after its entry is gone (else the
reconciler brings it back). When the queue package gains requeue/drop functions with
the event kind's compensation, only these two functions change.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.queue import DeadEvent, EventQueue
from db import events as pending
from db.models import ScheduledEvent


@dataclass(frozen=True)
class Outcome:
    done: bool
    reason: str  # what happened, for the answer and the audit log


async def find(queue: EventQueue, event_id: int) -> DeadEvent | None:
    partition = await queue.find_dead(event_id)
    if partition is None:
        return None
    for dead in await queue.dead(partition, limit=1_000_000):
        if dead.id == event_id:
            return dead
    return None


async def requeue(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], event_id: int
) -> Outcome:
    dead = await find(queue, event_id)
    if dead is None:
        return Outcome(False, "not a dead event")
    if dead.event is not None and dead.event.durable:
        async with sessions() as session, session.begin():
            await pending.revive(session, [event_id])
    if not await queue.requeue_dead(dead.partition, event_id):
        return Outcome(False, "cannot be requeued (no payload): drop it")
    return Outcome(True, "requeued: it runs now, in its village's order")


async def drop(
    queue: EventQueue, sessions: async_sessionmaker[AsyncSession], event_id: int
) -> Outcome:
    dead = await find(queue, event_id)
    if dead is None:
        return Outcome(False, "not a dead event")
    if not await queue.drop_dead(dead.partition, event_id):
        return Outcome(False, "it left the dead letters meanwhile")
    if dead.event is None or dead.event.durable:
        async with sessions() as session, session.begin():
            await session.execute(delete(ScheduledEvent).where(ScheduledEvent.id == event_id))
    return Outcome(True, "dropped")
