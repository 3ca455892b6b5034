"""Alembic environment: runs on the connection handed over by ``db.migrate``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from db.models import Base

config = context.config
connection = config.attributes.get("connection")


def run(conn: Connection) -> None:
    context.configure(
        connection=conn,
        target_metadata=Base.metadata,
        render_as_batch=True,  # SQLite needs batch mode to alter tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if connection is not None:
    run(connection)
else:  # the plain `alembic` CLI (for writing new revisions) with a sync URL
    url = config.get_main_option("sqlalchemy.url") or ""
    sync_url = url.replace("+asyncpg", "+psycopg").replace("+aiosqlite", "")
    with create_engine(sync_url).connect() as conn:
        run(conn)
