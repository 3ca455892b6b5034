"""Sessions, snapshot versions and snapshot bodies remembered in process, kept true by Redis.

The fast Redis connection turns on Redis's client-side caching in broadcast
mode (``CLIENT TRACKING ON BCAST PREFIX <sessions> PREFIX <versions>``): from
then on Redis pushes the name of every session or version key that anyone
changes, deletes or lets expire, on that same connection. So a poll whose
session and version are remembered is answered from memory, without a Redis
round trip, and is as fresh as Redis's pushes: a change is seen by every request
this process reads after the change's push (Redis sends it beside the writer's
reply, not before: a request read in the same instant may be answered from memory
once more, as if it had come a moment earlier):

- entries are filled only from replies read on the tracking connection, at the
  moment the reply is parsed (``fill_from_poll`` runs inside the protocol's
  ``data_received``), and Redis sends a key's invalidation after any reply that
  read its old value: a fill can never outlive the change that outdated it;
- a lost connection ends the tracking: everything is forgotten at once, and
  nothing is used again until a new connection has tracking on;
- ``FLUSHDB``/``FLUSHALL`` arrive as an invalidation of everything.

Revocation: logout marks the session revoked in Redis; this process forgets it
immediately, every other process when Redis's push arrives (sub-millisecond
on a live connection). As a last bound, independent of Redis, no session or
version is used longer than ``max_age_ms`` after it was read from Redis.

On Redis Cluster tracking stays off (``common.fastredis.ClusterFastRedis``
says why): sessions and versions are then never remembered, only bodies.

Snapshot bodies need no invalidation: a body is stored with its version and
served only for that version. The sizes are bounded (the oldest entries go
first), so a flood of tokens or players cannot grow the process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webfront.keys import REVOKED, JunkEntry, decode_cached


class LocalCache:
    def __init__(
        self,
        session_prefix: str,
        version_prefix: str,
        max_entries: int,
        max_age_ms: int,
        max_bodies: int | None = None,
    ) -> None:
        self.session_prefix = session_prefix.encode()
        self.version_prefix = version_prefix.encode()
        self.max_entries = max_entries  # sessions, and versions
        self.max_bodies = max_entries if max_bodies is None else max_bodies
        self.max_age_ms = max_age_ms
        self.active = False  # True while the tracking connection is up
        # token hash -> (player id, session expiry ms, read at ms)
        self.sessions: dict[str, tuple[int, int, int]] = {}
        # player id -> (version, read at ms)
        self.versions: dict[int, tuple[str, int]] = {}
        # (player id, msgpack?) -> (version, encoded body without server_time_ms)
        self.bodies: dict[tuple[int, bool], tuple[str, bytes]] = {}

    def prefixes(self) -> tuple[str, ...]:
        """The key prefixes whose changes Redis must push to us."""
        return (self.session_prefix.decode(), self.version_prefix.decode())

    # ---- reads (the hot path)

    def player(self, digest: str, now_ms: int) -> int | None:
        """The player of a remembered, unexpired session, or None (ask Redis)."""
        entry = self.sessions.get(digest)
        if entry is None:
            return None
        player_id, expires_ms, read_ms = entry
        if expires_ms <= now_ms or now_ms - read_ms >= self.max_age_ms:
            del self.sessions[digest]
            return None
        return player_id

    def version(self, player_id: int, now_ms: int) -> str | None:
        entry = self.versions.get(player_id)
        if entry is None:
            return None
        if now_ms - entry[1] >= self.max_age_ms:
            del self.versions[player_id]
            return None
        return entry[0]

    def body(self, player_id: int, version: str, packed: bool) -> bytes | None:
        entry = self.bodies.get((player_id, packed))
        if entry is None or entry[0] != version:
            return None
        return entry[1]

    # ---- fills

    def fill_version(self, player_id: int, reply: list[Any], packed: bool, now_ms: int) -> None:
        """Remember what a ``snapshot_poll.lua`` reply read (called as the reply is parsed)."""
        if not reply:
            return
        version = reply[0].decode()
        if self.active:
            self._put(self.versions, player_id, (version, now_ms))
        if len(reply) > 1:
            self.put_body(player_id, version, packed, reply[1])

    def fill_session(self, digest: str, value: bytes | None, now_ms: int) -> bool:
        """Remember a session key's value as read from Redis; False if it logs nobody in."""
        if not self.active or value is None or value == REVOKED:
            return False
        try:
            entry = decode_cached(value)
        except JunkEntry:  # the reader drops it (SessionStore.drop_junk)
            return False
        if entry is None or entry[1] <= now_ms:
            return False
        self._put(self.sessions, digest, (entry[0], entry[1], now_ms))
        return True

    def put_body(self, player_id: int, version: str, packed: bool, body: bytes) -> None:
        """Bodies are immutable per version: any body may be remembered, tracking or not."""
        self._put(self.bodies, (player_id, packed), (version, body), self.max_bodies)

    def _put(self, table: dict[Any, Any], key: Any, value: Any, limit: int | None = None) -> None:
        table.pop(key, None)  # re-inserted last: eviction takes the oldest first
        table[key] = value
        if len(table) > (self.max_entries if limit is None else limit):
            del table[next(iter(table))]

    # ---- invalidation

    def forget_session(self, digest: str) -> None:
        self.sessions.pop(digest, None)

    def forget_versions(self, player_ids: Iterable[int]) -> None:
        for player_id in player_ids:
            self.versions.pop(player_id, None)

    def invalidate(self, keys: list[bytes] | None) -> None:
        """Redis's push: these keys changed (None: the whole database was flushed)."""
        if keys is None:
            self.sessions.clear()
            self.versions.clear()
            return
        for key in keys:
            if key.startswith(self.version_prefix):  # <prefix>{<player id>}
                rest = key[len(self.version_prefix) + 1 : -1]
                if rest.isdigit():
                    self.versions.pop(int(rest), None)
            elif key.startswith(self.session_prefix):
                self.sessions.pop(key[len(self.session_prefix) :].decode(), None)

    def tracking_started(self) -> None:
        self.sessions.clear()
        self.versions.clear()
        self.active = True

    def tracking_lost(self) -> None:
        self.active = False
        self.sessions.clear()
        self.versions.clear()
