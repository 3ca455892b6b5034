"""Rule refusals of the space game: each has a stable ``code`` and an HTTP status.

400: the request can never succeed as written; 409: it conflicts with the
planet's current state (a busy queue, too few resources) and may succeed later.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SpaceRuleError(Exception):
    """Base class: a command broke a rule; nothing was changed."""

    code: ClassVar[str] = "rule_violation"
    http_status: ClassVar[int] = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class UnknownName(SpaceRuleError):
    """A building, research or ship name the game does not have."""

    code = "unknown_name"


class InvalidFleet(SpaceRuleError):
    """Empty fleet, bad count, cargo over capacity, target is the origin, ..."""

    code = "invalid_fleet"


class QueueBusy(SpaceRuleError):
    """The build (per planet), research (per player) or shipyard (per planet) queue is busy."""

    code = "queue_busy"
    http_status = 409


class NotEnough(SpaceRuleError):
    """Too few resources, ships or fuel on the planet now."""

    code = "not_enough"
    http_status = 409


class RequirementMissing(SpaceRuleError):
    """A building or research must reach a level first (a shipyard to build ships, ...)."""

    code = "requirement_missing"
    http_status = 409


class MaxLevel(SpaceRuleError):
    code = "max_level"
    http_status = 409


class NotRecallable(SpaceRuleError):
    """Only an outbound fleet before its arrival can be recalled."""

    code = "not_recallable"
    http_status = 409


class UnknownTarget(SpaceRuleError):
    code = "unknown_target"
    http_status = 404


RULE_ERRORS: tuple[type[Exception], ...] = (SpaceRuleError,)
