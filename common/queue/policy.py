"""When a failed event runs again: exponential backoff, then the dead letters."""

from __future__ import annotations

from dataclasses import dataclass

from common.queue.constants import BACKOFF_BASE_MS, BACKOFF_MAX_MS, MAX_ATTEMPTS


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """After failure number ``n`` an event waits ``base * 2**(n-1)`` ms (capped at ``max_ms``);
    failure number ``max_attempts`` sends it to the dead letters instead."""

    max_attempts: int = MAX_ATTEMPTS
    base_ms: int = BACKOFF_BASE_MS
    max_ms: int = BACKOFF_MAX_MS

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_ms < 0 or self.max_ms < self.base_ms:
            raise ValueError(f"bad retry policy {self}")

    def delay_ms(self, failures: int) -> int:
        """Wait before the next run of an event that has failed ``failures`` times (>= 1)."""
        return min(self.base_ms << min(failures - 1, 40), self.max_ms)

    def gives_up(self, failures: int) -> bool:
        return failures >= self.max_attempts
