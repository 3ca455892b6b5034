"""index troops by home village (moved to the reference game's branch)

This revision once indexed the reference game's ``troops`` by ``home_village_id``.
The game's tables now belong to its own Alembic branch (refgame/migrations), whose
first revision creates that index where it is absent; a database made before keeps
the index this revision made. The revision id stays so such databases upgrade.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 13:00:00.000000
"""

from __future__ import annotations

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
