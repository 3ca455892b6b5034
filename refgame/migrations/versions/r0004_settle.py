"""settlers on their way, and a residence in every village

The ``settle_marches`` table (settlers marching to found a village) and a level-0
``residence`` row in every village that lacks one (every building kind has a row,
so an upgrade is an UPDATE).

Revision ID: r0004_settle
Revises: r0003_rankings
Create Date: 2026-12-01 17:20:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r0004_settle"
down_revision = "r0003_rankings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settle_marches",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True,
            nullable=False,
        ),
        sa.Column("origin_village_id", sa.BigInteger(), nullable=False),
        sa.Column("x", sa.Integer(), nullable=False),
        sa.Column("y", sa.Integer(), nullable=False),
        sa.Column("settlers", sa.Integer(), nullable=False),
        sa.Column("depart_ms", sa.BigInteger(), nullable=False),
        sa.Column("arrive_ms", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_settle_marches")),
    )  # fmt: skip
    with op.batch_alter_table("settle_marches", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_settle_marches_origin_village_id"), ["origin_village_id"], unique=False
        )
    op.execute(
        "INSERT INTO buildings (village_id, kind, level) SELECT v.id, 'residence', 0 "
        "FROM villages v WHERE NOT EXISTS (SELECT 1 FROM buildings b "
        "WHERE b.village_id = v.id AND b.kind = 'residence')"
    )


def downgrade() -> None:
    op.execute("DELETE FROM buildings WHERE kind = 'residence'")
    op.drop_table("settle_marches")
