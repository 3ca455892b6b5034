"""The reference game's own tables: buildings, build and training orders, troops,
marches, settlers on their way, trades, reports, alliances (members, invitations) and messages.

They live in the game's own ``MetaData`` (its Alembic branch, ``refgame/migrations``,
creates them); foreign keys reach the framework's places and players by column object.
Times are integer ms since the epoch; ids are the framework's ``BigId``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from db.models import NAMING, BigId, Player, Village

MIGRATIONS = Path(__file__).with_name("migrations") / "versions"  # the game's Alembic branch
_VILLAGE_ID = Village.__table__.c.id
_PLAYER_ID = Player.__table__.c.id


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {int: BigInteger, dict[str, Any]: JSON}  # noqa: RUF012


class Building(Base):
    __tablename__ = "buildings"

    village_id: Mapped[int] = mapped_column(
        ForeignKey(_VILLAGE_ID, ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, default=0)


class BuildOrder(Base):
    __tablename__ = "build_orders"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    village_id: Mapped[int] = mapped_column(ForeignKey(_VILLAGE_ID, ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    target_level: Mapped[int] = mapped_column(Integer)
    started_ms: Mapped[int]
    done_ms: Mapped[int]


class Troop(Base):
    """Troops standing in ``village_id``; ``home_village_id`` differs for reinforcements."""

    __tablename__ = "troops"
    # a player's troops away are found by their home (snapshots, a deleted home village)
    __table_args__ = (Index("ix_troops_home", "home_village_id"),)

    village_id: Mapped[int] = mapped_column(
        ForeignKey(_VILLAGE_ID, ondelete="CASCADE"), primary_key=True
    )
    home_village_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    unit: Mapped[str] = mapped_column(String(32), primary_key=True)
    count: Mapped[int]


class TrainingOrder(Base):
    __tablename__ = "training_orders"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    village_id: Mapped[int] = mapped_column(ForeignKey(_VILLAGE_ID, ondelete="CASCADE"), index=True)
    unit: Mapped[str] = mapped_column(String(32))
    count: Mapped[int]
    started_ms: Mapped[int]
    done_ms: Mapped[int]


class March(Base):
    """Troops on the way; ``troops`` maps unit -> count, ``loot`` resource -> units."""

    __tablename__ = "marches"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # attack, raid, reinforce, return
    origin_village_id: Mapped[int] = mapped_column(BigInteger, index=True)
    target_village_id: Mapped[int] = mapped_column(BigInteger, index=True)
    troops: Mapped[dict[str, Any]]
    loot: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    depart_ms: Mapped[int]
    arrive_ms: Mapped[int]
    event_id: Mapped[int]


class SettleMarch(Base):
    """Settlers on the way to found a village on the free field (x, y)."""

    __tablename__ = "settle_marches"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    origin_village_id: Mapped[int] = mapped_column(BigInteger, index=True)
    x: Mapped[int] = mapped_column(Integer)
    y: Mapped[int] = mapped_column(Integer)
    settlers: Mapped[int] = mapped_column(Integer)
    depart_ms: Mapped[int]
    arrive_ms: Mapped[int]
    event_id: Mapped[int]


class Trade(Base):
    """Merchants on the way: to the target (``homebound`` false, carrying ``resources``) or
    back home (``delivered`` and ``lost`` say what became of them). Deleted when home."""

    __tablename__ = "trades"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    origin_village_id: Mapped[int] = mapped_column(BigInteger, index=True)
    target_village_id: Mapped[int] = mapped_column(BigInteger, index=True)
    resources: Mapped[dict[str, Any]]  # resource -> whole units sent
    delivered: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    lost: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    merchants: Mapped[int] = mapped_column(Integer)
    depart_ms: Mapped[int]
    arrive_ms: Mapped[int]
    return_ms: Mapped[int]
    homebound: Mapped[bool] = mapped_column(Boolean, default=False)
    event_id: Mapped[int]


class Report(Base):
    __tablename__ = "reports"
    __table_args__ = (Index("ix_reports_player_created", "player_id", "created_ms"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    player_id: Mapped[int] = mapped_column(ForeignKey(_PLAYER_ID, ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(String(128))
    body: Mapped[dict[str, Any]]
    created_ms: Mapped[int]
    is_read: Mapped[bool] = mapped_column(Boolean, default=False)


class PlayerPoints(Base):
    """Battle points a player has earned so far (``refgame.points`` says how)."""

    __tablename__ = "player_points"

    player_id: Mapped[int] = mapped_column(
        ForeignKey(_PLAYER_ID, ondelete="CASCADE"), primary_key=True
    )
    attack_points: Mapped[int] = mapped_column(default=0)
    defence_points: Mapped[int] = mapped_column(default=0)


class Ranking(Base):
    """A player's place in one ranking (population, attack, defence), as the last run of
    the ranking job computed it (``refgame.rankings``)."""

    __tablename__ = "rankings"
    __table_args__ = (Index("ix_rankings_kind_rank", "kind", "rank"),)

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    player_id: Mapped[int] = mapped_column(
        ForeignKey(_PLAYER_ID, ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer)
    value: Mapped[int]
    computed_ms: Mapped[int]


class Alliance(Base):
    """A group of players; ``name_key``/``tag_key`` make look-alike names and tags taken."""

    __tablename__ = "alliances"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(32))
    name_key: Mapped[str] = mapped_column(String(192), unique=True)
    tag: Mapped[str] = mapped_column(String(8))
    tag_key: Mapped[str] = mapped_column(String(8), unique=True)
    created_ms: Mapped[int]
    # every membership change updates it first: the row lock orders an alliance's changes
    changed_ms: Mapped[int]


class AllianceMember(Base):
    """A player's one alliance: the primary key on ``player_id`` is the rule, in the DB."""

    __tablename__ = "alliance_members"
    __table_args__ = (
        Index("ix_alliance_members_alliance", "alliance_id"),
        # at most one founder per alliance (at least one: the commands, checked by chaos)
        Index(
            "uq_alliance_members_founder",
            "alliance_id",
            unique=True,
            sqlite_where=text("role = 'founder'"),
            postgresql_where=text("role = 'founder'"),
        ),
    )

    player_id: Mapped[int] = mapped_column(
        ForeignKey(_PLAYER_ID, ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    alliance_id: Mapped[int] = mapped_column(ForeignKey("alliances.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))  # founder, leader, member
    joined_ms: Mapped[int]


class AllianceInvitation(Base):
    __tablename__ = "alliance_invitations"
    __table_args__ = (Index("ix_alliance_invitations_player", "player_id"),)

    alliance_id: Mapped[int] = mapped_column(
        ForeignKey("alliances.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[int] = mapped_column(
        ForeignKey(_PLAYER_ID, ondelete="CASCADE"), primary_key=True
    )
    invited_by: Mapped[int] = mapped_column(BigInteger)
    created_ms: Mapped[int]


class Message(Base):
    """One recipient's copy of a message (an alliance message is one row per member)."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_recipient_id", "recipient_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    recipient_id: Mapped[int] = mapped_column(ForeignKey(_PLAYER_ID, ondelete="CASCADE"))
    sender_id: Mapped[int | None] = mapped_column(ForeignKey(_PLAYER_ID, ondelete="SET NULL"))
    sender_name: Mapped[str] = mapped_column(String(32))  # kept when the account goes
    to_alliance: Mapped[bool] = mapped_column(Boolean, default=False)
    subject: Mapped[str] = mapped_column(String(80))
    body: Mapped[str] = mapped_column(String(2000))
    created_ms: Mapped[int]
    is_read: Mapped[bool] = mapped_column(Boolean, default=False)
