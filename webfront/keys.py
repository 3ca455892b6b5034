"""Every Redis key the web tier uses, in one place, ready for Redis Cluster.

A player's keys share the hash tag ``{<player_id>}`` (one cluster slot), so the
snapshot poll script reads the version and the cached body of a player in one
call. Snapshot versions live in ``common.snapshot_versions``; their key is
reused here. A session key is read and written alone (the token does not name
its player), so it needs no tag: its whole name spreads sessions over the
slots. A rate-limit counter is tagged by its scope and who it counts; the
checks of one hit may lie in different slots (``webfront.ratelimit``).
"""

from __future__ import annotations

from common.snapshot_versions import version_key

REVOKED = b"-"  # a session key's value once revoked, or for a token known not to exist

__all__ = ["REVOKED", "rate_limit", "session", "snapshot", "version_key", "version_prefix"]


class JunkEntry(Exception):
    """A session cache entry that is neither ``<player_id>:<expires_ms>`` nor revoked."""


def decode_cached(value: bytes) -> tuple[int, int] | None:
    """``(player_id, expires_ms)`` of a cached entry, None when revoked; JunkEntry else."""
    if value == REVOKED:
        return None
    player, _, expires = value.partition(b":")
    if not (player.isdigit() and expires.isdigit() and len(player) < 20 and len(expires) < 20):
        raise JunkEntry
    return int(player), int(expires)


def session(prefix: str, token_hash: str) -> str:
    """Cached session: ``b"<player_id>:<expires_ms>"``, or ``b"-"`` once revoked or unknown."""
    return f"{prefix}:sess:{token_hash}"


def version_prefix(prefix: str) -> str:
    """What every snapshot version key starts with (the local cache tracks it)."""
    return version_key(prefix, 0).removesuffix("{0}")


def snapshot(prefix: str, player_id: int, fmt: str) -> str:
    """The player's latest built snapshot body in one format (``j`` JSON, ``m`` msgpack),
    stored as ``b"<version>:<body>"``: the poll script serves it only when that version is
    still current, so a body never outlives its version (and the key needs no version)."""
    return f"{prefix}:snap:{{{player_id}}}:{fmt}"


def rate_limit(prefix: str, scope: str, ident: str, window_start_ms: int) -> str:
    return f"{prefix}:rl:{{{scope}:{ident}}}:{window_start_ms}"
