"""spacegame: stock columns for metal, crystal and deuterium; the game's sg_ tables

Constraint names follow the framework's naming convention (``gameapi.NAMING``),
so they are the same on every database and match the models.

Revision ID: sg0001
Revises:
Create Date: 2026-12-01 12:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gameapi import Resource
from gameapi.migration import add_stock_columns, drop_stock_columns

revision = "sg0001"
down_revision = None
branch_labels = ("spacegame",)
depends_on = "0003"

RESOURCES = [Resource(r, cap=r) for r in ("metal", "crystal", "deuterium")]
# the type of the framework's ids, so foreign keys match them (INTEGER on SQLite)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(table: str, column: str, target: str, ondelete: str = "CASCADE") -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}", ondelete=ondelete
    )


def _index(table: str, column: str, unique: bool = False) -> None:
    op.create_index(f"ix_{table}_{column}", table, [column], unique=unique)


def upgrade() -> None:
    add_stock_columns(op, RESOURCES)
    op.create_table(
        "sg_planets",
        sa.Column("place_id", BigId, nullable=False),
        sa.Column("temperature", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("place_id", name="pk_sg_planets"),
        _fk("sg_planets", "place_id", "villages"),
    )
    for table, owner, target, value in (
        ("sg_buildings", "place_id", "villages", sa.Column("level", sa.Integer(), nullable=False)),
        ("sg_ships", "place_id", "villages", sa.Column("count", sa.BigInteger(), nullable=False)),
        ("sg_research", "player_id", "players", sa.Column("level", sa.Integer(), nullable=False)),
    ):
        op.create_table(
            table,
            sa.Column(owner, BigId, nullable=False),
            sa.Column("name", sa.String(32), nullable=False),
            value,
            sa.PrimaryKeyConstraint(owner, "name", name=f"pk_{table}"),
            _fk(table, owner, target),
        )
    op.create_table(
        "sg_orders",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("slot", sa.String(48), nullable=False),
        sa.Column("queue", sa.String(16), nullable=False),
        sa.Column("place_id", BigId, nullable=False),
        sa.Column("player_id", BigId, nullable=False),
        sa.Column("item", sa.String(32), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("started_ms", sa.BigInteger(), nullable=False),
        sa.Column("done_ms", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sg_orders"),
        sa.UniqueConstraint("slot", name="uq_sg_orders_slot"),
        _fk("sg_orders", "place_id", "villages"),
        _fk("sg_orders", "player_id", "players"),
    )
    _index("sg_orders", "place_id")
    _index("sg_orders", "event_id", unique=True)
    op.create_table(
        "sg_fleets",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("owner_id", BigId, nullable=False),
        sa.Column("origin_id", BigId, nullable=False),
        sa.Column("target_id", BigId, nullable=True),
        sa.Column("mission", sa.String(16), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("ships", sa.JSON(), nullable=False),
        *(sa.Column(r.name, sa.BigInteger(), nullable=False) for r in RESOURCES),
        sa.Column("speed_pct", sa.Integer(), nullable=False),
        sa.Column("depart_ms", sa.BigInteger(), nullable=False),
        sa.Column("arrive_ms", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sg_fleets"),
        _fk("sg_fleets", "owner_id", "players"),
        _fk("sg_fleets", "origin_id", "villages"),
        _fk("sg_fleets", "target_id", "villages", ondelete="SET NULL"),
    )
    for column in ("owner_id", "origin_id", "target_id"):
        _index("sg_fleets", column)
    _index("sg_fleets", "event_id", unique=True)
    op.create_table(
        "sg_reports",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("player_id", BigId, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sg_reports"),
        _fk("sg_reports", "player_id", "players"),
    )
    _index("sg_reports", "player_id")


def downgrade() -> None:
    for table in ("sg_reports", "sg_fleets", "sg_orders", "sg_research", "sg_ships"):
        op.drop_table(table)
    op.drop_table("sg_buildings")
    op.drop_table("sg_planets")
    drop_stock_columns(op, RESOURCES)
