"""index troops by home village

A player's troops away (reinforcements standing in other villages) are read by
``home_village_id``, which is not the leading column of the primary key.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 13:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("troops", schema=None) as batch_op:
        batch_op.create_index("ix_troops_home", ["home_village_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("troops", schema=None) as batch_op:
        batch_op.drop_index("ix_troops_home")
