"""the dead-events index holds only dead events

An index of ``dead_ms`` over every row also held every pending (NULL) one, and a planner
whose statistics lagged behind a fresh world's inserts read "not dead" through it: every
command's settle horizon then fetched and sorted every pending event. Partial, the index
serves what it is for (an operator lists the dead events) and nothing else.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 21:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_DEAD = sa.text("dead_ms IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("scheduled_events") as batch_op:
        batch_op.drop_index("ix_scheduled_events_dead")
        batch_op.create_index(
            "ix_scheduled_events_dead",
            ["dead_ms"],
            unique=False,
            postgresql_where=_DEAD,
            sqlite_where=_DEAD,
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduled_events") as batch_op:
        batch_op.drop_index("ix_scheduled_events_dead")
        batch_op.create_index("ix_scheduled_events_dead", ["dead_ms"], unique=False)
