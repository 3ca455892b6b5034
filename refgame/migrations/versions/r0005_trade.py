"""trades: merchants carrying resources between villages

Revision ID: r0005_trade
Revises: r0004_settle
Create Date: 2026-12-01 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r0005_trade"
down_revision = "r0004_settle"
branch_labels = None
depends_on = None


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "trades",
        sa.Column("id", big, autoincrement=True, nullable=False),
        sa.Column("origin_village_id", sa.BigInteger(), nullable=False),
        sa.Column("target_village_id", sa.BigInteger(), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("delivered", sa.JSON(), nullable=False),
        sa.Column("lost", sa.JSON(), nullable=False),
        sa.Column("merchants", sa.Integer(), nullable=False),
        sa.Column("depart_ms", sa.BigInteger(), nullable=False),
        sa.Column("arrive_ms", sa.BigInteger(), nullable=False),
        sa.Column("return_ms", sa.BigInteger(), nullable=False),
        sa.Column("homebound", sa.Boolean(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trades")),
    )
    with op.batch_alter_table("trades", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_trades_origin_village_id"), ["origin_village_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_trades_target_village_id"), ["target_village_id"], unique=False
        )
    # every building kind has a row in every village (an upgrade is an UPDATE); villages
    # from before get the marketplace unbuilt (new ones start with level 1)
    op.execute(
        "INSERT INTO buildings (village_id, kind, level) SELECT v.id, 'marketplace', 0 "
        "FROM villages v WHERE NOT EXISTS (SELECT 1 FROM buildings b "
        "WHERE b.village_id = v.id AND b.kind = 'marketplace')"
    )


def downgrade() -> None:
    op.execute("DELETE FROM buildings WHERE kind = 'marketplace'")
    op.drop_table("trades")
