"""A village's population, the size the map shows: the sum of its buildings' levels.

Like Travian's, it grows as a village is built up, so the map tells a young
village from a developed one. It is read, never stored: one indexed sum per village.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, select

from refgame.models import Building

__all__ = ["POPULATION", "village_population"]

# the one rule: population is the sum of the building levels (over one village or many)
POPULATION = func.sum(Building.level)


def village_population(village_id: ColumnElement[int]) -> ColumnElement[Any]:
    """The population of the village whose id is ``village_id`` (a correlated subquery)."""
    return (
        select(func.coalesce(POPULATION, 0))
        .where(Building.village_id == village_id)
        .scalar_subquery()
    )
