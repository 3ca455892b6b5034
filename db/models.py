"""SQLAlchemy 2.0 models of a strategy world.

Times are integer ms since the epoch (``common.clock``). The narrow hot table the
per-second tick rewrites, ``village_stock``, has the game's resource columns: it is
built from the game's declaration (``db.stock.Stocks``), not here. Everything else
about a village lives in ``Village`` so tick updates touch as few bytes as possible.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names, so Alembic migrations are the same on every database.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BIGINT on PostgreSQL, INTEGER on SQLite (so SQLite's rowid aliasing gives autoincrement).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {int: BigInteger, dict[str, Any]: JSON}  # noqa: RUF012


class Player(Base):
    __tablename__ = "players"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(32), unique=True)
    # common.names.name_key(name): look-alike names share it, so the second one is refused
    name_key: Mapped[str] = mapped_column(String(192), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    created_ms: Mapped[int]
    is_bot: Mapped[bool] = mapped_column(Boolean, default=False)


class PlayerSession(Base):
    """A login. Only a hash of the token is stored, so a leaked table logs nobody in."""

    __tablename__ = "player_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    player_id: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"), index=True)
    created_ms: Mapped[int]
    expires_ms: Mapped[int] = mapped_column(index=True)  # pruned once expired
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class Village(Base):
    __tablename__ = "villages"
    __table_args__ = (UniqueConstraint("x", "y", name="uq_villages_xy"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    player_id: Mapped[int | None] = mapped_column(
        ForeignKey("players.id", ondelete="SET NULL"), index=True
    )
    name: Mapped[str] = mapped_column(String(32))
    x: Mapped[int] = mapped_column(Integer)
    y: Mapped[int] = mapped_column(Integer)
    created_ms: Mapped[int]


class ScheduledEvent(Base):
    """The durable record of a pending timed event; Redis only indexes these by due time.

    A row exists while its event is pending: the handler's transaction deletes
    it (and records the id in ``processed_events``), so effects and the record
    of having run commit together.
    """

    __tablename__ = "scheduled_events"
    __table_args__ = (
        Index("ix_scheduled_events_due", "due_ms"),
        Index("ix_scheduled_events_village_due", "village_id", "due_ms"),
        # an operator lists the dead events; partial, so "not dead" (nearly every row) is
        # never read through it (migration 0007)
        Index(
            "ix_scheduled_events_dead",
            "dead_ms",
            postgresql_where=text("dead_ms IS NOT NULL"),
            sqlite_where=text("dead_ms IS NOT NULL"),
        ),
        # the earliest event that holds the world (db.events.HOLDS_WORLD) in one probe,
        # whatever the planner's statistics say (every command's settle horizon asks)
        Index(
            "ix_scheduled_events_healthy_due",
            "due_ms",
            postgresql_where=text("attempts = 0 AND dead_ms IS NULL"),
            sqlite_where=text("attempts = 0 AND dead_ms IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(32))
    village_id: Mapped[int]
    due_ms: Mapped[int]
    priority: Mapped[int] = mapped_column(SmallInteger, default=0)
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    created_ms: Mapped[int]
    # failed runs so far, the last one's error, and when it went to the dead letters
    # (``db.events``: what a failing or dead event still holds back)
    attempts: Mapped[int] = mapped_column(SmallInteger, default=0, server_default="0")
    last_error: Mapped[str | None] = mapped_column(String(200), default=None)
    dead_ms: Mapped[int | None] = mapped_column(BigInteger, default=None)


class ProcessedEvent(Base):
    __tablename__ = "processed_events"

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(32))
    village_id: Mapped[int]
    processed_ms: Mapped[int] = mapped_column(index=True)


class IdempotentResponse(Base):
    """The first response to a command sent with an ``Idempotency-Key``."""

    __tablename__ = "idempotent_responses"

    player_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]]
    created_ms: Mapped[int] = mapped_column(index=True)


# --- operators (webfront.admin) ---------------------------------------------------------------


class Operator(Base):
    """An operator account of the console; apart from players (``wgctl operator create``)."""

    __tablename__ = "operators"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(32), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    created_ms: Mapped[int]


class OperatorSession(Base):
    """An operator's login; like ``PlayerSession``, only the token's hash is stored."""

    __tablename__ = "operator_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    operator_id: Mapped[int] = mapped_column(
        ForeignKey("operators.id", ondelete="CASCADE"), index=True
    )
    created_ms: Mapped[int]
    expires_ms: Mapped[int]
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class PlayerBan(Base):
    """A banned player: no login, no session, no command until unbanned."""

    __tablename__ = "player_bans"

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    reason: Mapped[str] = mapped_column(String(200))
    operator_id: Mapped[int | None] = mapped_column(ForeignKey("operators.id", ondelete="SET NULL"))
    created_ms: Mapped[int]


class AuditEntry(Base):
    """One operator action: who did what to which target, when, and how it ended."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    operator_id: Mapped[int | None] = mapped_column(ForeignKey("operators.id", ondelete="SET NULL"))
    operator_name: Mapped[str] = mapped_column(String(32))  # kept when the account goes
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]]
    created_ms: Mapped[int] = mapped_column(index=True)
