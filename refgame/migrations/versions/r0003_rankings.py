"""rankings: battle points per player and the computed rankings

``player_points`` accumulates each player's attack and defence points (the march
handler adds them in the battle's transaction); ``rankings`` holds the last
ranking job's result, one row per ranking kind and player.

Revision ID: r0003_rankings
Revises: r0002_social
Create Date: 2026-12-01 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r0003_rankings"
down_revision = "r0002_social"
branch_labels = None
depends_on = None


def _player_id() -> sa.Column[int]:
    return sa.Column(
        "player_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "player_points",
        _player_id(),
        sa.Column("attack_points", sa.BigInteger(), nullable=False),
        sa.Column("defence_points", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_player_points_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("player_id", name=op.f("pk_player_points")),
    )
    op.create_table(
        "rankings",
        sa.Column("kind", sa.String(length=16), nullable=False),
        _player_id(),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.Column("computed_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_rankings_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("kind", "player_id", name=op.f("pk_rankings")),
    )
    with op.batch_alter_table("rankings", schema=None) as batch_op:
        batch_op.create_index("ix_rankings_kind_rank", ["kind", "rank"], unique=False)


def downgrade() -> None:
    op.drop_table("rankings")  # its index goes with it
    op.drop_table("player_points")
