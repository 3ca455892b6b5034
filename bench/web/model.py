"""What a load run sends and what it measured; the phases and their targets."""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES = ("bare", "poll_304", "full", "commands")
PHASE_SHORT = {"bare": "bare hello", "poll_304": "304 poll", "full": "full", "commands": "commands"}
PHASE_TITLES = {
    "bare": "bare aiohttp hello (ceiling)",
    "poll_304": "snapshot poll, If-None-Match -> 304",
    "full": "full snapshot (no If-None-Match)",
    "commands": "command mix (build / train)",
}
TARGETS = {"poll_304_ratio": 0.7, "full_ratio": 0.4, "p99_ms": 50.0}
PASSWORD = "bench-password-1"
RESULT_MARK = "WRKJSON "


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    headers: dict[str, str]
    body: str | None = None


@dataclass
class LoadResult:
    phase: str
    connections: int
    duration_s: float
    requests: int
    rps: float
    latency_ms: dict[str, float]
    statuses: dict[str, int]
    errors: dict[str, int]
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds by role in the run

    @property
    def ok_share(self) -> float:
        ok = sum(n for s, n in self.statuses.items() if s.startswith(("2", "3")))
        return ok / max(1, self.requests)

    def cpu_us_per_request(self, role: str) -> float:
        return self.cpu_s.get(role, 0.0) * 1e6 / max(1, self.requests)


@dataclass
class Player:
    token: str
    village_id: int
    etag: str | None = None
    player_id: int = 0
