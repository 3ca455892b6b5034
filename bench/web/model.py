"""What a load run sends and what it measured; the phases and their targets."""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES = (
    "bare", "poll_304", "full", "build", "bare_commands", "commands", "bare_refused", "refused"
)  # fmt: skip
PHASE_SHORT = {
    "bare": "bare hello",
    "poll_304": "304 poll",
    "full": "full",
    "build": "snapshot build",
    "bare_commands": "bare build",
    "commands": "build",
    "bare_refused": "bare refused",
    "refused": "refused",
}
PHASE_TITLES = {
    "bare": "bare aiohttp hello (ceiling)",
    "poll_304": "snapshot poll, If-None-Match -> 304",
    "full": "full snapshot (no If-None-Match)",
    "build": "full snapshot built for each request (body caches off)",
    "bare_commands": "POST /api/build by hand, aiohttp + asyncpg (ceiling)",
    "commands": "POST /api/build, players who can pay",
    "bare_refused": "POST /api/build by hand, nothing to pay with (ceiling)",
    "refused": "POST /api/build, refused: nothing to pay with",
}
# each phase's ceiling: the ratio of a phase is its req/s over its ceiling's
CEILING = {
    "poll_304": "bare",
    "full": "bare",
    "commands": "bare_commands",
    "refused": "bare_refused",
}
TARGETS = {
    "poll_304_ratio": 0.7,
    "full_ratio": 0.4,
    "p99_ms": 50.0,
    "commands_ratio": 0.5,
    "commands_p99_ms": 100.0,
}
PASSWORD = "bench-password-1"
RESULT_MARK = "WRKJSON "


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    headers: dict[str, str]
    body: str | None = None
    fresh_key: bool = False  # send a new Idempotency-Key with every request


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
    builds: int | None = None  # snapshot bodies the server built (one server process only)

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
