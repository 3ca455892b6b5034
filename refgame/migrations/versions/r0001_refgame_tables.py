"""the reference game's tables and stock columns

Buildings, build and training orders, troops, marches and reports, and the
``village_stock`` columns of wood, clay, iron and crop with their rates and the
warehouse and granary caps. A database made before the game had its own branch
(framework revisions 0001/0002 made all of this) already has them: each is
created only where it is absent, so such a database upgrades without a change.

Revision ID: r0001
Revises:
Create Date: 2026-12-01 12:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gameapi.migration import add_stock_columns, drop_stock_columns, has_table
from refgame.resources import RESOURCE_TYPES

revision = "r0001"
down_revision = None
branch_labels = ("refgame",)
depends_on = "0003"


def upgrade() -> None:
    add_stock_columns(op, RESOURCE_TYPES)
    if not has_table(op, "buildings"):
        op.create_table(
            "buildings",
            sa.Column(
                "village_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
            ),
            sa.Column("kind", sa.String(length=32), nullable=False),
            sa.Column("level", sa.Integer(), nullable=False),
            sa.ForeignKeyConstraint(
                ["village_id"],
                ["villages.id"],
                name=op.f("fk_buildings_village_id_villages"),
                ondelete="CASCADE",
            ),
            sa.PrimaryKeyConstraint("village_id", "kind", name=op.f("pk_buildings")),
        )

    if not has_table(op, "build_orders"):
        op.create_table(
            "build_orders",
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                autoincrement=True,
                nullable=False,
            ),
            sa.Column(
                "village_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
            ),
            sa.Column("kind", sa.String(length=32), nullable=False),
            sa.Column("target_level", sa.Integer(), nullable=False),
            sa.Column("started_ms", sa.BigInteger(), nullable=False),
            sa.Column("done_ms", sa.BigInteger(), nullable=False),
            sa.ForeignKeyConstraint(
                ["village_id"],
                ["villages.id"],
                name=op.f("fk_build_orders_village_id_villages"),
                ondelete="CASCADE",
            ),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_build_orders")),
        )
        with op.batch_alter_table("build_orders", schema=None) as batch_op:
            batch_op.create_index(
                batch_op.f("ix_build_orders_village_id"), ["village_id"], unique=False
            )

    if not has_table(op, "troops"):
        op.create_table(
            "troops",
            sa.Column(
                "village_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
            ),
            sa.Column("home_village_id", sa.BigInteger(), nullable=False),
            sa.Column("unit", sa.String(length=32), nullable=False),
            sa.Column("count", sa.BigInteger(), nullable=False),
            sa.ForeignKeyConstraint(
                ["village_id"],
                ["villages.id"],
                name=op.f("fk_troops_village_id_villages"),
                ondelete="CASCADE",
            ),
            sa.PrimaryKeyConstraint(
                "village_id", "home_village_id", "unit", name=op.f("pk_troops")
            ),
        )

    if not has_table(op, "training_orders"):
        op.create_table(
            "training_orders",
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                autoincrement=True,
                nullable=False,
            ),
            sa.Column(
                "village_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
            ),
            sa.Column("unit", sa.String(length=32), nullable=False),
            sa.Column("count", sa.BigInteger(), nullable=False),
            sa.Column("started_ms", sa.BigInteger(), nullable=False),
            sa.Column("done_ms", sa.BigInteger(), nullable=False),
            sa.ForeignKeyConstraint(
                ["village_id"],
                ["villages.id"],
                name=op.f("fk_training_orders_village_id_villages"),
                ondelete="CASCADE",
            ),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_training_orders")),
        )
        with op.batch_alter_table("training_orders", schema=None) as batch_op:
            batch_op.create_index(
                batch_op.f("ix_training_orders_village_id"), ["village_id"], unique=False
            )

    if not has_table(op, "marches"):
        op.create_table(
            "marches",
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                autoincrement=True,
                nullable=False,
            ),
            sa.Column("kind", sa.String(length=16), nullable=False),
            sa.Column("origin_village_id", sa.BigInteger(), nullable=False),
            sa.Column("target_village_id", sa.BigInteger(), nullable=False),
            sa.Column("troops", sa.JSON(), nullable=False),
            sa.Column("loot", sa.JSON(), nullable=False),
            sa.Column("depart_ms", sa.BigInteger(), nullable=False),
            sa.Column("arrive_ms", sa.BigInteger(), nullable=False),
            sa.Column("event_id", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_marches")),
        )
        with op.batch_alter_table("marches", schema=None) as batch_op:
            batch_op.create_index(
                batch_op.f("ix_marches_origin_village_id"), ["origin_village_id"], unique=False
            )
            batch_op.create_index(
                batch_op.f("ix_marches_target_village_id"), ["target_village_id"], unique=False
            )

    if not has_table(op, "reports"):
        op.create_table(
            "reports",
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                autoincrement=True,
                nullable=False,
            ),
            sa.Column(
                "player_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
            ),
            sa.Column("kind", sa.String(length=16), nullable=False),
            sa.Column("title", sa.String(length=128), nullable=False),
            sa.Column("body", sa.JSON(), nullable=False),
            sa.Column("created_ms", sa.BigInteger(), nullable=False),
            sa.Column("is_read", sa.Boolean(), nullable=False),
            sa.ForeignKeyConstraint(
                ["player_id"],
                ["players.id"],
                name=op.f("fk_reports_player_id_players"),
                ondelete="CASCADE",
            ),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_reports")),
        )
        with op.batch_alter_table("reports", schema=None) as batch_op:
            batch_op.create_index(
                "ix_reports_player_created", ["player_id", "created_ms"], unique=False
            )

    indexes = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("troops")}
    if "ix_troops_home" not in indexes:
        # a player's troops away (reinforcements in other villages) are read by their home
        with op.batch_alter_table("troops", schema=None) as batch_op:
            batch_op.create_index("ix_troops_home", ["home_village_id"], unique=False)


def downgrade() -> None:
    for table in ("reports", "marches", "training_orders", "troops", "build_orders", "buildings"):
        op.drop_table(table)  # their indexes go with them
    drop_stock_columns(op, RESOURCE_TYPES)
