"""Queue errors: a caller's mistake (``ScheduleError``) or a broken entry (``MalformedEvent``)."""

from __future__ import annotations


class QueueError(Exception):
    """Base class of the queue's errors."""


class ScheduleError(QueueError, ValueError):
    """An event cannot be scheduled as asked (bad due time, priority, kind or payload)."""


class MalformedEvent(QueueError):
    """A queue entry in Redis cannot be decoded; it goes to the dead letters with this reason."""
