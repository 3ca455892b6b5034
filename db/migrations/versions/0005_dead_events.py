"""dead events and expired sessions are found by index

Migration 0003 gave ``scheduled_events`` its ``attempts``, ``last_error`` (the
reason a dead event died) and ``dead_ms``. An operator lists the dead events
(``common.queue.deadletters``) by ``dead_ms``, and the retention job
(``gameserver.retention``) deletes expired sessions by ``expires_ms``, in
bounded batches: both need an index.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 12:30:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scheduled_events", schema=None) as batch_op:
        batch_op.create_index("ix_scheduled_events_dead", ["dead_ms"], unique=False)
    with op.batch_alter_table("player_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_player_sessions_expires_ms", ["expires_ms"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("player_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_player_sessions_expires_ms")
    with op.batch_alter_table("scheduled_events", schema=None) as batch_op:
        batch_op.drop_index("ix_scheduled_events_dead")
