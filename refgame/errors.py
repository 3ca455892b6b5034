"""Errors of the reference game's rules: a player asked for something the rules forbid.

Each class has a stable ``code`` (the web tier returns it in
``{"error": {"code": ..., "message": ...}}``) and an ``http_status`` hint:
400 for a request that can never succeed as written, 409 for one that conflicts
with the village's current state and may succeed later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class RuleError(Exception):
    """Base class: a command broke a rule of the game; nothing was changed."""

    code: ClassVar[str] = "rule_violation"
    http_status: ClassVar[int] = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: Mapping[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The JSON error body: ``{"code", "message"}`` plus ``details`` when there are any."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = dict(self.details)
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidQuantity(RuleError):
    """A count that is not a whole number, is zero or negative, or is beyond the limit."""

    code = "invalid_quantity"


class UnknownBuilding(RuleError):
    code = "unknown_building"


class UnknownUnit(RuleError):
    code = "unknown_unit"


class MaxLevel(RuleError):
    """The building (counting the levels already queued) is at its maximum level."""

    code = "max_level"
    http_status = 409


class PrerequisiteMissing(RuleError):
    """Another building must reach a level first (e.g. barracks to train, rally point to march)."""

    code = "prerequisite_missing"
    http_status = 409


class QueueFull(RuleError):
    code = "queue_full"
    http_status = 409


class InsufficientResources(RuleError):
    code = "insufficient_resources"
    http_status = 409


class InsufficientTroops(RuleError):
    code = "insufficient_troops"
    http_status = 409


class InvalidMarch(RuleError):
    """A march of an unknown kind, without troops, or to its own village."""

    code = "invalid_march"


class NotRecallable(RuleError):
    """A return march, or a march past its recall window."""

    code = "not_recallable"
    http_status = 409


class NotYourVillage(RuleError):
    """A village or march that does not exist or belongs to another player (same answer)."""

    code = "not_found"
    http_status = 404


class EventsPending(RuleError):
    """The village has timed events due that have not run yet; retry in a moment.

    Spending settles the stock at the present; an overdue event that changes
    production must run first, or the change would apply late.
    """

    code = "events_pending"
    http_status = 409


class NotFound(RuleError):
    """A player, alliance, invitation or message that does not exist (or is not yours)."""

    code = "not_found"
    http_status = 404


class NameTaken(RuleError):
    """An alliance name or tag already taken (look-alikes count as taken)."""

    code = "name_taken"
    http_status = 409


class AlreadyInAlliance(RuleError):
    code = "already_in_alliance"
    http_status = 409


class NotInAlliance(RuleError):
    code = "not_in_alliance"
    http_status = 409


class NotALeader(RuleError):
    """Only the founder or a leader may do this (kick and promote: the founder only)."""

    code = "not_a_leader"
    http_status = 403


class AllianceFull(RuleError):
    """The alliance has its maximum of members, or of pending invitations."""

    code = "alliance_full"
    http_status = 409


class InvalidTarget(RuleError):
    """A command aimed at oneself (invite, kick, message) or at nobody."""

    code = "invalid_target"


class InvalidTrade(RuleError):
    """A shipment to its own village, or to a village that does not exist."""

    code = "invalid_trade"


class InsufficientMerchants(RuleError):
    """Not enough free merchants at home; ``details``: needed, free, total."""

    code = "insufficient_merchants"
    http_status = 409
