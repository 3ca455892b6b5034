"""players.name_key: look-alike names collide

``name_key`` is the confusable skeleton of the case-folded name
(``common.names.name_key``), unique. Existing rows are backfilled; when two
existing players already share a key, the older keeps it and each later one
gets its key suffixed with ``#<id>``, so both can still log in by their exact
name while no new look-alike of either can register.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 12:30:00.000000
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from common.names import name_key

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

_players = sa.table(
    "players", sa.column("id", sa.BigInteger), sa.column("name"), sa.column("name_key")
)


def upgrade() -> None:
    with op.batch_alter_table("players", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=192), nullable=True))
    conn = op.get_bind()
    seen: set[str] = set()
    rows = conn.execute(sa.select(_players.c.id, _players.c.name).order_by(_players.c.id))
    updates = []
    for player_id, name in rows:
        key = name_key(name)
        if key in seen:
            log.warning("player %d's name looks like an older player's; key suffixed", player_id)
            key = f"{key}#{player_id}"
        seen.add(key)
        updates.append({"pid": player_id, "key": key})
    if updates:
        conn.execute(
            _players.update()
            .where(_players.c.id == sa.bindparam("pid"))
            .values(name_key=sa.bindparam("key")),
            updates,
        )
    with op.batch_alter_table("players", schema=None) as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=192), nullable=False)
        batch_op.create_unique_constraint(batch_op.f("uq_players_name_key"), ["name_key"])


def downgrade() -> None:
    with op.batch_alter_table("players", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_players_name_key"), type_="unique")
        batch_op.drop_column("name_key")
