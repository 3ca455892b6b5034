"""Tuning of the web tier that is code, not environment: limits, costs, TTLs.

``create_app(settings, config=WebConfig(...))`` lets tests and operators'
launch scripts change them; the defaults are the production values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from webfront.passwords import HashParams


@dataclass(frozen=True)
class Limit:
    """At most ``count`` hits per fixed window of ``window_ms``."""

    count: int
    window_ms: int


@dataclass(frozen=True)
class WebConfig:
    password_hash: HashParams = field(default_factory=HashParams)
    hash_threads: int = 2  # password hashes at once per process (each holds a hash's memory)
    # Login: an address first, then an existing account from that address, then the account
    # from everywhere (a ceiling that takes several addresses to reach). A refused attempt
    # counts only against the limit that refused it, and accounts that do not exist are not
    # counted, so a flood of made-up names makes no keys and locks nobody out.
    login_per_address: Limit = Limit(60, 15 * 60_000)
    login_per_account_address: Limit = Limit(10, 15 * 60_000)
    login_per_account: Limit = Limit(100, 15 * 60_000)
    register_per_address: Limit = Limit(20, 60 * 60_000)
    commands_per_player: Limit = Limit(30, 10_000)
    max_body_bytes: int = 16 * 1024  # larger request bodies get 413
    # A cached snapshot body is keyed by its version, so it is never stale: the TTL only frees
    # the memory of players who stopped changing. Each body gets ttl * (1 + jitter * U[0, 1)),
    # so bodies built together (a deploy, a burst of polls) do not all expire together.
    # 0: no body is cached in Redis (with local_cache_bodies=0 every full answer is built: how
    # `bench web` measures a build).
    snapshot_cache_ttl_ms: int = 600_000
    snapshot_cache_jitter: float = 0.25
    # snapshot statements at once per process (a connection each); builds that pile up behind
    # them are read together, up to snapshot_batch players per statement, and so are the
    # builds asked within snapshot_gather_ms of the last statement (one starts no sooner
    # after it: webfront.snapshot_reads). 0: each statement starts as soon as a slot is free.
    snapshot_builds: int = 4
    snapshot_batch: int = 64
    snapshot_gather_ms: int = 20
    # Commands that wrote nothing before their closing statement (their guard, rows, events
    # and idempotency record) hand it to command_writers connections (db.shared_writes;
    # PostgreSQL only): closings that wait for a busy writer are written together, up to
    # command_batch per statement. With command_gather_ms, so are those handed over
    # within that time of the last statement: worth it only where commands come faster
    # than a writer writes them one by one (hundreds a second per process and more); at
    # the rates of 16,000 players it only delays them, so 0 by default.
    command_writers: int = 2
    command_batch: int = 64
    command_gather_ms: int = 0
    # Sessions, versions and bodies remembered in process, invalidated by Redis's client-side
    # caching pushes (webfront.localcache); max_age bounds an entry's life even without a push.
    local_cache: bool = True
    local_cache_entries: int = 50_000  # sessions, and versions, remembered; oldest go first
    local_cache_bodies: int = 5_000  # bodies remembered (a few KB each); oldest go first
    local_cache_max_age_ms: int = 60_000
    negative_session_ttl_ms: int = 60_000  # an unknown token is remembered this long
    reports_max_per_page: int = 100
    # /metrics answers local clients (webfront.proxies), or anyone sending this token
    # (when None: the setting WEB_METRICS_TOKEN)
    metrics_token: str | None = None
