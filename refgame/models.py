"""The reference game's own tables: buildings, build and training orders, troops,
marches, trades and reports.

They live in the game's own ``MetaData`` (its Alembic branch, ``refgame/migrations``,
creates them); foreign keys reach the framework's places and players by column object.
Times are integer ms since the epoch; ids are the framework's ``BigId``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Index, Integer, MetaData, String
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
