"""Helpers for a game's Alembic branch (its ``migrations`` directory)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from db.stock import STOCK_TABLE
from gameapi.game import Resource

__all__ = ["add_stock_columns", "drop_stock_columns", "has_table"]


def has_table(op: Any, name: str) -> bool:
    """Whether the migration's database already has table ``name``."""
    return bool(sa.inspect(op.get_bind()).has_table(name))


def _existing_columns(op: Any) -> set[str]:
    return {c["name"] for c in sa.inspect(op.get_bind()).get_columns(STOCK_TABLE)}


def stock_column_names(resources: Sequence[Resource]) -> list[str]:
    """``village_stock``'s columns of ``resources``: stocks, rates, then one per cap."""
    caps = dict.fromkeys(r.cap for r in resources)
    return [
        *(r.name for r in resources),
        *(f"{r.name}_rate" for r in resources),
        *(f"{cap}_cap" for cap in caps),
    ]


def add_stock_columns(op: Any, resources: Sequence[Resource]) -> None:
    """Add the ``village_stock`` columns of ``resources`` that the table lacks.

    Idempotent: a column that exists (a database made before the game had its own
    branch) is left as it is. New columns are NOT NULL; existing rows get 0.
    """
    missing = [n for n in stock_column_names(resources) if n not in _existing_columns(op)]
    if not missing:
        return
    with op.batch_alter_table(STOCK_TABLE, schema=None) as batch_op:
        for name in missing:
            batch_op.add_column(
                sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
            )
    # rows come from the game's declaration (Stocks.row): no default is left behind
    with op.batch_alter_table(STOCK_TABLE, schema=None) as batch_op:
        for name in missing:
            batch_op.alter_column(name, server_default=None)


def drop_stock_columns(op: Any, resources: Sequence[Resource]) -> None:
    """Drop the ``village_stock`` columns of ``resources`` (a branch's downgrade)."""
    present = [n for n in stock_column_names(resources) if n in _existing_columns(op)]
    if present:
        with op.batch_alter_table(STOCK_TABLE, schema=None) as batch_op:
            for name in present:
                batch_op.drop_column(name)
