"""The timed-event queue: public API for web handlers and game rules.

Schedule in-memory events with ``EventQueue.schedule_many``; durable events
with ``durable.add_durable_events`` in the command's transaction, then
``EventQueue.index`` after the commit. Handlers are registered in a
``HandlerRegistry`` and run by the task server's workers.
"""

from __future__ import annotations

from common.queue.errors import MalformedEvent, QueueError, ScheduleError
from common.queue.eventqueue import EventQueue
from common.queue.events import Claim, DeadEvent, Event, NewEvent, PartitionStats
from common.queue.handlers import Handler, HandlerRegistry, Registration
from common.queue.policy import RetryPolicy
from common.queue.tx import Tx, UnknownEventKind

__all__ = [
    "Claim",
    "DeadEvent",
    "Event",
    "EventQueue",
    "Handler",
    "HandlerRegistry",
    "MalformedEvent",
    "NewEvent",
    "PartitionStats",
    "QueueError",
    "Registration",
    "RetryPolicy",
    "ScheduleError",
    "Tx",
    "UnknownEventKind",
]
