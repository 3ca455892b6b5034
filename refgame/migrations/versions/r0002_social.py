"""alliances, their members and invitations, and players' messages

A player belongs to at most one alliance: ``alliance_members`` has ``player_id`` as its
primary key, so two concurrent joins cannot both commit. A partial unique index allows
one founder per alliance.

Revision ID: r0002_social
Revises: r0001
Create Date: 2026-12-01 17:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r0002_social"
down_revision = "r0001"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alliances",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("name_key", sa.String(length=192), nullable=False),
        sa.Column("tag", sa.String(length=8), nullable=False),
        sa.Column("tag_key", sa.String(length=8), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("changed_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alliances")),
        sa.UniqueConstraint("name_key", name=op.f("uq_alliances_name_key")),
        sa.UniqueConstraint("tag_key", name=op.f("uq_alliances_tag_key")),
    )
    op.create_table(
        "alliance_members",
        sa.Column("player_id", _ID, autoincrement=False, nullable=False),
        sa.Column("alliance_id", _ID, nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("joined_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["alliance_id"],
            ["alliances.id"],
            name=op.f("fk_alliance_members_alliance_id_alliances"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_alliance_members_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("player_id", name=op.f("pk_alliance_members")),
    )
    op.create_index("ix_alliance_members_alliance", "alliance_members", ["alliance_id"])
    op.create_index(
        "uq_alliance_members_founder",
        "alliance_members",
        ["alliance_id"],
        unique=True,
        sqlite_where=sa.text("role = 'founder'"),
        postgresql_where=sa.text("role = 'founder'"),
    )
    op.create_table(
        "alliance_invitations",
        sa.Column("alliance_id", _ID, nullable=False),
        sa.Column("player_id", _ID, nullable=False),
        sa.Column("invited_by", sa.BigInteger(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["alliance_id"],
            ["alliances.id"],
            name=op.f("fk_alliance_invitations_alliance_id_alliances"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_alliance_invitations_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("alliance_id", "player_id", name=op.f("pk_alliance_invitations")),
    )
    op.create_index("ix_alliance_invitations_player", "alliance_invitations", ["player_id"])
    op.create_table(
        "messages",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("recipient_id", _ID, nullable=False),
        sa.Column("sender_id", _ID, nullable=True),
        sa.Column("sender_name", sa.String(length=32), nullable=False),
        sa.Column("to_alliance", sa.Boolean(), nullable=False),
        sa.Column("subject", sa.String(length=80), nullable=False),
        sa.Column("body", sa.String(length=2000), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("is_read", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["recipient_id"],
            ["players.id"],
            name=op.f("fk_messages_recipient_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sender_id"],
            ["players.id"],
            name=op.f("fk_messages_sender_id_players"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
    )
    op.create_index("ix_messages_recipient_id", "messages", ["recipient_id", "id"])


def downgrade() -> None:
    for table in ("messages", "alliance_invitations", "alliance_members", "alliances"):
        op.drop_table(table)  # their indexes go with them
