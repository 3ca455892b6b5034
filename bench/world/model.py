"""The player model, the service levels and how one measured step is judged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# every request a page sends, each counted once: a fetch after a push is measured as a poll
# too, and orders, marches and recalls as commands (``bench.world.load._MEASURED_AS``)
REQUEST_KINDS = ("poll", "command", "login", "arrive")
# the service levels a step must hold (``verdicts``)
SLO: dict[str, float] = {
    "poll_p99_ms": 100.0,
    "command_p99_ms": 250.0,
    "event_lateness_p99_s": 1.0,
    "tick_shard_p99_s": 1.0,
    "errors": 0,
}
# a load generator that starts requests later than this (p99) measures itself, not the servers
GENERATOR_LAG_P99_MS = 50.0
# a tier using this share of the cores it can use (one per process, at most the machine's)
SATURATED = 0.9
# the order "the first limit" is named in when several fail in one step
LIMIT_ORDER = (
    "errors", "poll_p99_ms", "command_p99_ms", "event_lateness_p99_s", "tick_shard_p99_s",
    "load_generator",
)  # fmt: skip
LIMIT_TITLES = {
    "errors": "errors (5xx, timeouts, refused connections, dropped streams)",
    "poll_p99_ms": "snapshot poll p99 ≥ 100 ms",
    "command_p99_ms": "command p99 ≥ 250 ms",
    "event_lateness_p99_s": "event lateness p99 ≥ 1 s",
    "tick_shard_p99_s": "tick shard p99 ≥ 1 s",
    "load_generator": "the load generator could not keep up (its start lag p99 ≥ 50 ms)",
}


# the result files: every player online (the default model), or a share of them; the README
# table shows the two side by side
RESULT = "world"
RESULT_ONLINE_SHARE = "world_online"


@dataclass(frozen=True)
class PlayerModel:
    """What one simulated player does (README "Capacity"): the defaults are the model."""

    poll_interval_s: float = 10.0  # a visible tab: GET /api/snapshot with If-None-Match
    push_share: float = 0.25  # of players hold GET /api/events open ...
    # ... and then poll this rarely, and fetch the snapshot when the stream says it changed
    push_poll_interval_s: float = 60.0
    command_interval_s: float = 120.0  # build or train (or recall a march), mean
    march_interval_s: float = 600.0  # a raid on a nearby bot village, mean
    recall_share: float = 0.25  # of marches are called back a few seconds after leaving
    recall_after_s: float = 3.0
    rich_share: float = 0.5  # of players can pay for anything; the others start as a bot does
    logins_per_player_day: float = 1.0  # real password logins (Argon2id), spread over time
    train_share: float = 0.4  # of the 2-minute commands train; the rest build
    # of the world's players online at once, each playing as above; the others are in the
    # world, their villages ticking, but send nothing (1: every player online, always)
    online_share: float = 1.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def result_name(self) -> str:
        return RESULT if self.online_share >= 1 else RESULT_ONLINE_SHARE

    def online(self, players: int) -> int:
        """How many of a world's ``players`` are online at once (at least one)."""
        return max(1, round(players * self.online_share))

    def logins_per_online_player_s(self) -> float:
        """Each of the world's players logs in ``logins_per_player_day``, and a login is
        sent by a player who is online: the online ones send them all."""
        return self.logins_per_player_day / self.online_share / 86_400

    def requests_per_player_s(self) -> float:
        """Requests per second one of the world's players sends on average, as the model
        schedules them (streams not counted, nor the fetches a stream's pushes bring: their
        rate is how often a player's snapshot changes, which the run measures)."""
        polls = (1 - self.push_share) / self.poll_interval_s
        polls += self.push_share / self.push_poll_interval_s
        commands = 1 / self.command_interval_s
        marches = (1 + self.recall_share) / self.march_interval_s
        online = (polls + commands + marches) * self.online_share
        return online + self.logins_per_player_day / 86_400


def hist_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile of a Prometheus histogram's cumulative ``(le, count)`` buckets,
    interpolated inside its bucket as ``histogram_quantile`` does; 0 without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return 0.0
    rank = q * buckets[-1][1]
    lower_le, lower_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return lower_le  # beyond the last bound: its lower edge is all we know
            if count == lower_count:
                return le
            return lower_le + (le - lower_le) * (rank - lower_count) / (count - lower_count)
        lower_le, lower_count = le, count
    return lower_le


def share_within(buckets: Sequence[tuple[float, float]], bound: float) -> float | None:
    """The share of observations ≤ ``bound`` (a bucket bound: exact); None without any."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    for le, count in buckets:
        if le == bound:
            return count / total
    raise ValueError(f"{bound} is not a bucket bound of this histogram")


def verdicts(step: Mapping[str, Any]) -> dict[str, bool]:
    """Which service levels a step held, from its measured figures alone."""
    lat = step["latency_ms"]
    late, tick = step["event_lateness"], step["tick_shard"]
    return {
        "poll_p99_ms": lat["poll"]["p99"] < SLO["poll_p99_ms"],
        "command_p99_ms": lat["command"]["p99"] < SLO["command_p99_ms"],
        # exact: 1 s is a bucket bound, so "p99 < 1 s" is "99% of the count within it"
        "event_lateness_p99_s": late["share_within_1s"] is None or late["share_within_1s"] >= 0.99,
        "tick_shard_p99_s": tick["share_within_1s"] is None or tick["share_within_1s"] >= 0.99,
        "errors": step["errors"]["total"] <= SLO["errors"],
        "load_generator": step["load_generator"]["start_lag_ms"]["p99"] < GENERATOR_LAG_P99_MS,
    }


def first_failed(held: Mapping[str, bool]) -> str | None:
    return next((name for name in LIMIT_ORDER if not held.get(name, True)), None)


def saturated_tiers(cpu: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Tiers that used at least ``SATURATED`` of the cores open to them."""
    return [tier for tier, c in cpu.items() if c["share_of_usable_cores"] >= SATURATED]


def target_sentence(target: Mapping[str, Any]) -> str:
    """``floor.target_figures`` in words (the console and the README table say the same)."""
    players, least = f"{target['players']:,}", f"{target['cores_at_least']:g}"
    window = target.get("measured_at_per_s", {}).get("commands_gathered_ms")
    gathered = f", commands gathered in {window} ms" if window else ""
    if "http_cores" not in target:  # a result of before the target's HTTP was measured
        return (
            f"{players} players' snapshot reads and writes alone, on bare asyncpg at their "
            f"rates, need {least} cores (PostgreSQL {target['postgres_cores']:g}) before any HTTP"
        )
    return (
        f"{players} players' traffic on bare parts, each kind at its cheapest, needs {least} "
        f"cores at least: HTTP {target['http_cores']:g} (bare aiohttp at saturation), password "
        f"hashes {target['password_hash_cores']:g}, snapshot reads and writes on asyncpg "
        f"{target['database_cores']:g} (PostgreSQL {target['postgres_cores']:g}{gathered}); "
        f"Redis, the tick and the streams not counted"
    )
