"""Banned players: no login, no session, every command refused with 403 ``banned``.

A ban commits its ``player_bans`` row, then revokes every live session of the player
(``SessionStore.revoke``: the database, Redis and this process's cache; other processes
by Redis's invalidation push). Each revoked session also leaves a marker in Redis for
the rest of its life, so a request that still carries it is told it was banned (403)
rather than that its session is unknown (401): the marker is read only on that failing
path, never on a request with a live session.

A login racing with a ban cannot keep a session: login checks the ban *after* it
created its session (and revokes it then), and a session created before the ban
committed is found by the ban's revocation pass.
"""

from __future__ import annotations

from redis.asyncio import Redis
from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from db.models import PlayerBan, PlayerSession
from webfront.admin.audit import record
from webfront.admin.operators import OperatorRow
from webfront.errors import ApiError
from webfront.sessions import SessionStore

BANNED_MESSAGE = "this account is banned by the operators of this world"


def banned_error() -> ApiError:
    return ApiError(403, "banned", BANNED_MESSAGE)


def marker_key(prefix: str, digest: str) -> str:
    """Set while a session revoked by a ban would still have lived."""
    return f"{prefix}:banned-sess:{digest}"


async def is_banned(engine: AsyncEngine, player_id: int) -> bool:
    async with engine.connect() as conn:
        found = await conn.execute(
            select(PlayerBan.player_id).where(PlayerBan.player_id == player_id)
        )
        return found.first() is not None


async def refuse_if_marked(redis: Redis, prefix: str, digest: str) -> None:
    """403 ``banned`` when ``digest`` is a session its player lost to a ban."""
    if await redis.exists(marker_key(prefix, digest)):
        raise banned_error()


async def _live_sessions(
    db: AsyncSession | AsyncConnection, player_id: int, now_ms: int, *, open_only: bool = True
) -> list[tuple[str, int]]:
    """(token hash, expiry) of the player's unexpired sessions (``open_only``: not revoked)."""
    query = select(PlayerSession.token_hash, PlayerSession.expires_ms).where(
        PlayerSession.player_id == player_id, PlayerSession.expires_ms > now_ms
    )
    if open_only:
        query = query.where(PlayerSession.revoked.is_(False))
    return [(str(r[0]), int(r[1])) for r in await db.execute(query)]


async def _sessions_now(
    engine: AsyncEngine, player_id: int, now_ms: int, *, open_only: bool = True
) -> list[tuple[str, int]]:
    async with engine.connect() as conn:
        return await _live_sessions(conn, player_id, now_ms, open_only=open_only)


async def ban(
    factory: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    sessions: SessionStore,
    redis: Redis,
    prefix: str,
    operator: OperatorRow,
    player_id: int,
    reason: str,
    now_ms: int,
) -> int:
    """Ban ``player_id`` (already banned: the reason stays); returns the sessions revoked.

    The ban row and its audit entry commit together before any session is revoked."""
    for attempt in (1, 2):
        try:
            async with factory() as session, session.begin():
                existing = await session.execute(
                    select(PlayerBan.player_id).where(PlayerBan.player_id == player_id)
                )
                if existing.first() is None:
                    await session.execute(
                        insert(PlayerBan).values(
                            player_id=player_id,
                            reason=reason,
                            operator_id=operator.id,
                            created_ms=now_ms,
                        )
                    )
                live = await _live_sessions(session, player_id, now_ms)
                await record(
                    session, operator, "ban", f"player:{player_id}",
                    {"reason": reason, "sessions_revoked": len(live)}, now_ms,
                )  # fmt: skip
            break
        except IntegrityError:  # another operator's ban won the insert: it is banned now
            if attempt == 2:
                raise
    # read again after the commit: a login that created its session meanwhile is here
    for digest, expires_ms in await _sessions_now(engine, player_id, now_ms):
        await redis.set(marker_key(prefix, digest), b"1", px=max(expires_ms - now_ms, 1))
        await sessions.revoke(digest)
    return len(live)


async def unban(
    factory: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    redis: Redis,
    prefix: str,
    operator: OperatorRow,
    player_id: int,
    now_ms: int,
) -> bool:
    """Lift a ban; False when the player was not banned. Old sessions stay revoked."""
    async with factory() as session, session.begin():
        gone = await session.execute(
            delete(PlayerBan).where(PlayerBan.player_id == player_id).returning(PlayerBan.player_id)
        )
        lifted = gone.first() is not None
        await record(
            session, operator, "unban", f"player:{player_id}", {"was_banned": lifted}, now_ms
        )
    # revoked sessions now answer 401 (log in again), not 403
    markers = [
        marker_key(prefix, d)
        for d, _ in await _sessions_now(engine, player_id, now_ms, open_only=False)
    ]
    if markers:
        await redis.delete(*markers)
    return lifted
