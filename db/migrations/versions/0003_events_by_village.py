"""failing and dead events in the database; pending events by village

``attempts``, ``last_error`` and ``dead_ms`` say what a pending event still holds
back (``db.events``). A worker asks, for the villages of a claimed batch,
whether an earlier pending event of theirs is missing from the batch (village
order), and commands ask whether a village has an overdue event: both look
events up by village.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scheduled_events", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("attempts", sa.SmallInteger(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("last_error", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("dead_ms", sa.BigInteger(), nullable=True))
        batch_op.create_index(
            "ix_scheduled_events_village_due", ["village_id", "due_ms"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduled_events", schema=None) as batch_op:
        batch_op.drop_index("ix_scheduled_events_village_due")
        batch_op.drop_column("dead_ms")
        batch_op.drop_column("last_error")
        batch_op.drop_column("attempts")
