"""Operator accounts and their sessions, apart from players' (own tables, own cookie).

Operators are few and their requests rare, so a session is read from the database on
every request (no Redis cache): a revoked or expired session ends at once everywhere.
A token is ``secrets.token_urlsafe(32)`` stored as its SHA-256 hash, like a player's.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Operator, OperatorSession
from webfront.sessions import token_hash

COOKIE = "wg_operator"  # never the players' cookie: a player's session opens no console
COOKIE_PATH = "/admin"
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{3,32}")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{43}")


class OperatorExists(Exception):
    """An operator with this name exists already."""


@dataclass(frozen=True)
class OperatorRow:
    id: int
    name: str
    created_ms: int


@dataclass(frozen=True)
class OperatorLogin:
    token: str
    operator_id: int
    expires_ms: int


async def create_operator(engine: AsyncEngine, name: str, password_hash: str, now_ms: int) -> int:
    """Insert an operator; raises OperatorExists."""
    try:
        async with engine.begin() as conn:
            found = await conn.execute(
                insert(Operator)
                .values(name=name, password_hash=password_hash, created_ms=now_ms)
                .returning(Operator.id)
            )
            return int(found.scalar_one())
    except IntegrityError:
        raise OperatorExists(f"an operator named {name!r} exists already") from None


async def list_operators(engine: AsyncEngine) -> list[OperatorRow]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(Operator.id, Operator.name, Operator.created_ms).order_by(Operator.id)
        )
        return [OperatorRow(int(r[0]), str(r[1]), int(r[2])) for r in rows]


async def find_operator(engine: AsyncEngine, name: str) -> tuple[int, str] | None:
    """(id, password hash) of the operator named ``name``."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(Operator.id, Operator.password_hash).where(Operator.name == name)
            )
        ).first()
    return None if row is None else (int(row[0]), str(row[1]))


async def set_operator_hash(engine: AsyncEngine, operator_id: int, password_hash: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(Operator).where(Operator.id == operator_id).values(password_hash=password_hash)
        )


def operator_token(authorization: str | None, cookies: dict[str, str]) -> str | None:
    """The operator token of a request: ``Authorization: Bearer`` first, then our cookie."""
    token: str | None = None
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            token = value.strip()
    else:
        token = cookies.get(COOKIE)
    if token is None or _TOKEN_RE.fullmatch(token) is None:
        return None
    return token


async def open_session(
    engine: AsyncEngine, operator_id: int, now_ms: int, ttl_ms: int
) -> OperatorLogin:
    token = secrets.token_urlsafe(32)
    expires = now_ms + ttl_ms
    async with engine.begin() as conn:
        await conn.execute(
            insert(OperatorSession).values(
                token_hash=token_hash(token),
                operator_id=operator_id,
                created_ms=now_ms,
                expires_ms=expires,
                revoked=False,
            )
        )
    return OperatorLogin(token, operator_id, expires)


async def session_operator(engine: AsyncEngine, token: str, now_ms: int) -> OperatorRow | None:
    """The operator a live session token belongs to, or None."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(Operator.id, Operator.name, Operator.created_ms)
                .join(OperatorSession, OperatorSession.operator_id == Operator.id)
                .where(
                    OperatorSession.token_hash == token_hash(token),
                    OperatorSession.revoked.is_(False),
                    OperatorSession.expires_ms > now_ms,
                )
            )
        ).first()
    return None if row is None else OperatorRow(int(row[0]), str(row[1]), int(row[2]))


async def close_session(engine: AsyncEngine, token: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(OperatorSession)
            .where(OperatorSession.token_hash == token_hash(token))
            .values(revoked=True)
        )
