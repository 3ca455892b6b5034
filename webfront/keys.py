"""Every Redis key the web tier uses, in one place.

Snapshot versions live in ``common.snapshot_versions``; their key is reused
here so the hot-path script can read them.
"""

from __future__ import annotations

from common.snapshot_versions import version_key

REVOKED = b"-"  # a session key's value once revoked, or for a token known not to exist


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
    """``version_prefix(p) + str(player_id)`` is the player's snapshot version key."""
    return version_key(prefix, 0)[:-1]


def snapshot(prefix: str, player_id: int, version: int, fmt: str) -> str:
    """A built snapshot body (without ``server_time_ms``) of one version in one format."""
    return f"{snapshot_prefix(prefix)}{player_id}:{version}:{fmt}"


def snapshot_prefix(prefix: str) -> str:
    return f"{prefix}:snap:"


def rate_limit(prefix: str, scope: str, ident: str, window_start_ms: int) -> str:
    return f"{prefix}:rl:{scope}:{ident}:{window_start_ms}"
