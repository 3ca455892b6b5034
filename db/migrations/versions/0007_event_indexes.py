"""the earliest healthy event is one index probe; the dead-events index holds only dead ones

Every command's settle horizon and every claimed batch's lookahead ask for the earliest
pending event that holds the world (``db.events.HOLDS_WORLD``: no failed run, not dead).
A planner whose statistics lagged behind a fresh world's inserts read it through the
index of ``dead_ms`` (which held every pending row as NULL) or a scan of the whole table,
then sorted every pending event, at every command. A partial index of ``due_ms`` over the
healthy events answers it with its first entry whatever the statistics say, and the
dead-events index, partial too, serves only what it is for (an operator lists them).

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
_HEALTHY = sa.text("attempts = 0 AND dead_ms IS NULL")  # db.events.HOLDS_WORLD


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
        batch_op.create_index(
            "ix_scheduled_events_healthy_due",
            ["due_ms"],
            unique=False,
            postgresql_where=_HEALTHY,
            sqlite_where=_HEALTHY,
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduled_events") as batch_op:
        batch_op.drop_index("ix_scheduled_events_healthy_due")
        batch_op.drop_index("ix_scheduled_events_dead")
        batch_op.create_index("ix_scheduled_events_dead", ["dead_ms"], unique=False)
