"""The space game's own tables (prefix ``sg_``), on their own MetaData.

Its Alembic branch (``migrations/versions``) creates them; foreign keys point
at the framework's places and players by column object. Every planet has a row
for every building and every ship kind from its creation (``world.new_place``),
so upgrades and arrivals are plain ``UPDATE ... SET n = n + k``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Integer, MetaData, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import gameapi

BigId = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements INTEGER keys
PLACE_ID = gameapi.places.c.id
PLAYER_ID = gameapi.players.c.id


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=gameapi.NAMING)
    type_annotation_map = {int: BigInteger, dict[str, Any]: JSON}  # noqa: RUF012


class Planet(Base):
    __tablename__ = "sg_planets"

    place_id: Mapped[int] = mapped_column(
        ForeignKey(PLACE_ID, ondelete="CASCADE"), primary_key=True
    )
    temperature: Mapped[int] = mapped_column(Integer)  # °C, drives deuterium


class Building(Base):
    __tablename__ = "sg_buildings"

    place_id: Mapped[int] = mapped_column(
        ForeignKey(PLACE_ID, ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, default=0)


class Ships(Base):
    __tablename__ = "sg_ships"

    place_id: Mapped[int] = mapped_column(
        ForeignKey(PLACE_ID, ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    count: Mapped[int] = mapped_column(default=0)


class Research(Base):
    """A player's research levels (one row per level reached at least once)."""

    __tablename__ = "sg_research"

    player_id: Mapped[int] = mapped_column(
        ForeignKey(PLAYER_ID, ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, default=0)


class Order(Base):
    """A running build, research or shipyard order; ``slot`` is unique, so each queue
    holds one order at a time: ``build:<place>``, ``shipyard:<place>``, ``research:<player>``."""

    __tablename__ = "sg_orders"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    slot: Mapped[str] = mapped_column(String(48), unique=True)
    queue: Mapped[str] = mapped_column(String(16))  # build, research, shipyard
    place_id: Mapped[int] = mapped_column(ForeignKey(PLACE_ID, ondelete="CASCADE"), index=True)
    player_id: Mapped[int] = mapped_column(ForeignKey(PLAYER_ID, ondelete="CASCADE"))
    item: Mapped[str] = mapped_column(String(32))
    amount: Mapped[int]  # the level reached, or the number of ships
    started_ms: Mapped[int]
    done_ms: Mapped[int]
    event_id: Mapped[int] = mapped_column(index=True, unique=True)


class Fleet(Base):
    """A fleet in flight: ``state`` out (to the target) or back (home to the origin)."""

    __tablename__ = "sg_fleets"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey(PLAYER_ID, ondelete="CASCADE"), index=True)
    origin_id: Mapped[int] = mapped_column(ForeignKey(PLACE_ID, ondelete="CASCADE"), index=True)
    target_id: Mapped[int | None] = mapped_column(
        ForeignKey(PLACE_ID, ondelete="SET NULL"), index=True
    )
    mission: Mapped[str] = mapped_column(String(16))  # transport, attack
    state: Mapped[str] = mapped_column(String(8))  # out, back
    ships: Mapped[dict[str, Any]]
    metal: Mapped[int] = mapped_column(default=0)  # cargo, whole units
    crystal: Mapped[int] = mapped_column(default=0)
    deuterium: Mapped[int] = mapped_column(default=0)
    speed_pct: Mapped[int] = mapped_column(Integer)
    depart_ms: Mapped[int]
    arrive_ms: Mapped[int]
    event_id: Mapped[int] = mapped_column(index=True, unique=True)
    seed: Mapped[int]  # the battle's, drawn when the fleet is sent


class Report(Base):
    __tablename__ = "sg_reports"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    player_id: Mapped[int] = mapped_column(ForeignKey(PLAYER_ID, ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # battle, transport, return
    created_ms: Mapped[int]
    body: Mapped[dict[str, Any]]


METADATA = Base.metadata
