"""Player sessions: random tokens, stored as SHA-256 hashes, cached in Redis.

A token is ``secrets.token_urlsafe(32)`` (256 random bits). The database row
(``PlayerSession``) is the truth; Redis caches each token hash as
``b"<player_id>:<expires_ms>"`` until it expires, so authenticating a request
costs one Redis read and no database read. Unknown tokens are cached as
``b"-"`` for a minute, so a flood of forged tokens cannot reach the database.

Logout writes the revocation to the database, then overwrites the cache
entry with ``b"-"`` for the rest of the session's life. Cache fills use
``SET NX``, so a fill racing with a logout can never bring a revoked session
back. Expiry is checked against the app clock on every read.

Each process also remembers sessions it has read (``webfront.localcache``),
kept true by Redis's invalidation pushes: logout forgets the session in its
own process at once, other processes when Redis's push arrives (and within
``WebConfig.local_cache_max_age_ms`` at most, even without it).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redis.asyncio import Redis
from redis.exceptions import ResponseError
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import Clock
from common.fastredis import FastRedis
from db.models import PlayerSession
from webfront import keys
from webfront.keys import REVOKED, JunkEntry, decode_cached

if TYPE_CHECKING:
    from webfront.localcache import LocalCache

log = logging.getLogger(__name__)

COOKIE = "wg_session"
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{43}")  # what token_urlsafe(32) makes


@dataclass(frozen=True)
class NewSession:
    token: str
    player_id: int
    expires_ms: int


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_from_headers(authorization: str | None, cookie_header: str | None) -> str | None:
    """The session token of a request: ``Authorization: Bearer`` first, then the cookie.

    Anything not shaped like one of our tokens is None, so garbage costs no lookup.
    """
    token: str | None = None
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            token = value.strip()
    elif cookie_header is not None:
        # a hand parse: http.cookies is slow and this runs on every poll
        for part in cookie_header.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                token = value.strip('"')
                break
    if token is None or _TOKEN_RE.fullmatch(token) is None:
        return None
    return token


def parse_cached(value: bytes, now_ms: int) -> int | None:
    """The player id of a cached entry, or None when revoked, unknown or expired; JunkEntry
    when it is neither (whoever wrote it, the database decides: ``SessionStore.drop_junk``)."""
    entry = decode_cached(value)
    if entry is None or entry[1] <= now_ms:
        return None
    return entry[0]


class SessionStore:
    def __init__(
        self,
        engine: AsyncEngine,
        redis: Redis,
        fast: FastRedis,
        prefix: str,
        clock: Clock,
        ttl_ms: int,
        negative_ttl_ms: int,
        local: LocalCache | None = None,
    ) -> None:
        self._engine = engine
        self._redis = redis
        self._fast = fast
        self._prefix = prefix
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._negative_ttl_ms = negative_ttl_ms
        self._local = local

    async def create(self, player_id: int) -> NewSession:
        token = secrets.token_urlsafe(32)
        digest = token_hash(token)
        now = self._clock.now_ms()
        expires = now + self._ttl_ms
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(PlayerSession).values(
                    token_hash=digest,
                    player_id=player_id,
                    created_ms=now,
                    expires_ms=expires,
                    revoked=False,
                )
            )
        await self._redis.set(
            keys.session(self._prefix, digest), f"{player_id}:{expires}", px=self._ttl_ms
        )
        return NewSession(token, player_id, expires)

    async def revoke(self, digest: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                update(PlayerSession).where(PlayerSession.token_hash == digest).values(revoked=True)
            )
        await self._redis.set(keys.session(self._prefix, digest), REVOKED, px=self._ttl_ms)
        if self._local is not None:  # this process: now; the others: by Redis's push
            self._local.forget_session(digest)

    async def player_of(self, digest: str) -> int | None:
        """The player a token hash logs in, or None: no Redis read when remembered, else one."""
        local = self._local
        key = keys.session(self._prefix, digest)
        try:
            if local is not None:
                player_id = local.player(digest, self._clock.now_ms())
                if player_id is not None:
                    return player_id
                cached = await self._fast.execute(
                    "GET",
                    key,
                    on_reply=lambda value: local.fill_session(digest, value, self._clock.now_ms()),
                )
            else:
                cached = await self._fast.execute("GET", key)
        except ResponseError as exc:  # WRONGTYPE: not a string at all
            if not str(exc).startswith("WRONGTYPE"):
                raise
            return await self.drop_junk(digest)
        if cached is not None:
            try:
                return parse_cached(cached, self._clock.now_ms())
            except JunkEntry:
                return await self.drop_junk(digest)
        return await self.load(digest)

    async def drop_junk(self, digest: str) -> int | None:
        """A junk cache entry (a wrong value or type) is a miss: dropped, then read from the
        database. The log names no token hash (``SECURITY.md``)."""
        log.warning("a session cache entry held junk: dropped, read from the database")
        await self._redis.delete(keys.session(self._prefix, digest))
        return await self.load(digest)

    async def load(self, digest: str) -> int | None:
        """Read a session from the database and cache what was found (a cache miss)."""
        now = self._clock.now_ms()
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(
                        PlayerSession.player_id, PlayerSession.expires_ms, PlayerSession.revoked
                    ).where(PlayerSession.token_hash == digest)
                )
            ).first()
        key = keys.session(self._prefix, digest)
        if row is None or row.revoked or row.expires_ms <= now:
            await self._redis.set(key, REVOKED, px=self._negative_ttl_ms, nx=True)
            return None
        await self._redis.set(
            key, f"{row.player_id}:{row.expires_ms}", px=row.expires_ms - now, nx=True
        )
        return int(row.player_id)
