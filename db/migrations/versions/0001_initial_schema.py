"""initial schema (the framework's tables)

The reference game's tables and stock columns were made here before the game had its
own branch (refgame/migrations); a database made then keeps them, and the game's first
revision creates them only where they are absent.

Revision ID: 0001
Revises:
Create Date: 2026-11-30 05:57:24.824705
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotent_responses",
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "key", name=op.f("pk_idempotent_responses")),
    )
    with op.batch_alter_table("idempotent_responses", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_idempotent_responses_created_ms"), ["created_ms"], unique=False
        )

    op.create_table(
        "players",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("is_bot", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_players")),
        sa.UniqueConstraint("name", name=op.f("uq_players_name")),
    )
    op.create_table(
        "processed_events",
        sa.Column("event_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("village_id", sa.BigInteger(), nullable=False),
        sa.Column("processed_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_processed_events")),
    )
    with op.batch_alter_table("processed_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_processed_events_processed_ms"), ["processed_ms"], unique=False
        )

    op.create_table(
        "scheduled_events",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("village_id", sa.BigInteger(), nullable=False),
        sa.Column("due_ms", sa.BigInteger(), nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduled_events")),
    )
    with op.batch_alter_table("scheduled_events", schema=None) as batch_op:
        batch_op.create_index("ix_scheduled_events_due", ["due_ms"], unique=False)

    op.create_table(
        "village_stock",
        sa.Column("village_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("village_id", name=op.f("pk_village_stock")),
    )
    with op.batch_alter_table("village_stock", schema=None) as batch_op:
        batch_op.create_index("ix_village_stock_shard", ["shard"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        # The tick rewrites every row each rotation: free space on each page lets
        # PostgreSQL do HOT updates (no index writes, no page hopping).
        op.execute("ALTER TABLE village_stock SET (fillfactor = 50)")

    op.create_table(
        "player_sessions",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "player_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("expires_ms", sa.BigInteger(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_player_sessions_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_player_sessions")),
    )
    with op.batch_alter_table("player_sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_player_sessions_player_id"), ["player_id"], unique=False
        )

    op.create_table(
        "villages",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("player_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("x", sa.Integer(), nullable=False),
        sa.Column("y", sa.Integer(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_villages_player_id_players"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_villages")),
        sa.UniqueConstraint("x", "y", name="uq_villages_xy"),
    )
    with op.batch_alter_table("villages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_villages_player_id"), ["player_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("villages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_villages_player_id"))

    op.drop_table("villages")

    with op.batch_alter_table("player_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_player_sessions_player_id"))

    op.drop_table("player_sessions")
    with op.batch_alter_table("village_stock", schema=None) as batch_op:
        batch_op.drop_index("ix_village_stock_shard")

    op.drop_table("village_stock")
    with op.batch_alter_table("scheduled_events", schema=None) as batch_op:
        batch_op.drop_index("ix_scheduled_events_due")

    op.drop_table("scheduled_events")
    with op.batch_alter_table("processed_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_processed_events_processed_ms"))

    op.drop_table("processed_events")
    op.drop_table("players")

    with op.batch_alter_table("idempotent_responses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_idempotent_responses_created_ms"))

    op.drop_table("idempotent_responses")
