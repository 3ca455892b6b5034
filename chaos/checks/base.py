"""A check's result: what it verifies, how many items, its violations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refgame.buildings import FIELD_KINDS
from refgame.resources import RESOURCES as RESOURCES  # the reference game's: chaos plays it

FIELD_RESOURCE = {kind: res for res, kind in FIELD_KINDS.items()}
MAX_LISTED = 25  # violations kept per check in the summary


@dataclass
class Check:
    name: str
    what: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # for a post-mortem, not the summary

    def fail(self, message: str) -> None:
        self.violations.append(message)
