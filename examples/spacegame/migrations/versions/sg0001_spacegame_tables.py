"""spacegame: stock columns for metal, crystal and deuterium; the game's sg_ tables

Revision ID: sg0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from gameapi.migration import add_stock_columns

revision = "sg0001"
down_revision = None
branch_labels = ("spacegame",)
depends_on = "0003"

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
RESOURCES = ("metal", "crystal", "deuterium")


def _place(name: str = "place_id", **kw: Any) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), sa.ForeignKey("villages.id", ondelete="CASCADE"), **kw)


def _player(name: str = "player_id", **kw: Any) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), sa.ForeignKey("players.id", ondelete="CASCADE"), **kw)


def upgrade() -> None:
    from gameapi import Resource

    add_stock_columns(op, [Resource(r, cap=r) for r in RESOURCES])
    op.create_table(
        "sg_planets",
        _place(primary_key=True),
        sa.Column("temperature", sa.Integer(), nullable=False),
    )
    op.create_table(
        "sg_buildings",
        _place(primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("level", sa.Integer(), nullable=False),
    )
    op.create_table(
        "sg_ships",
        _place(primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "sg_research",
        _player(primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("level", sa.Integer(), nullable=False),
    )
    op.create_table(
        "sg_orders",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("slot", sa.String(48), nullable=False, unique=True),
        sa.Column("queue", sa.String(16), nullable=False),
        _place(nullable=False, index=True),
        _player(nullable=False),
        sa.Column("item", sa.String(32), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("started_ms", sa.BigInteger(), nullable=False),
        sa.Column("done_ms", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False, index=True, unique=True),
    )
    op.create_table(
        "sg_fleets",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        _player("owner_id", nullable=False, index=True),
        _place("origin_id", nullable=False, index=True),
        sa.Column(
            "target_id",
            sa.BigInteger(),
            sa.ForeignKey("villages.id", ondelete="SET NULL"),
            nullable=True,
            index=True,
        ),
        sa.Column("mission", sa.String(16), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("ships", sa.JSON(), nullable=False),
        *(sa.Column(r, sa.BigInteger(), nullable=False) for r in RESOURCES),
        sa.Column("speed_pct", sa.Integer(), nullable=False),
        sa.Column("depart_ms", sa.BigInteger(), nullable=False),
        sa.Column("arrive_ms", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False, index=True, unique=True),
        sa.Column("seed", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "sg_reports",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        _player(nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    for table in ("sg_reports", "sg_fleets", "sg_orders", "sg_research", "sg_ships"):
        op.drop_table(table)
    op.drop_table("sg_buildings")
    op.drop_table("sg_planets")
