"""Aggregates a game's snapshot part or query may use on every supported database.

``json_list(column)`` collects a group's values into one JSON array: ``json_agg`` on
PostgreSQL, ``json_group_array`` on SQLite. Its type is JSON, so in a snapshot part it
fills a JSON slot (for example the member ids of the viewer's group, read beside its
name in one row). The order of the values is not defined: a part's ``view`` sorts them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class json_list(FunctionElement[Any]):
    """``json_list(column)``: the column's values of the group as a JSON array."""

    type = JSON()
    name = "json_list"
    inherit_cache = True


@compiles(json_list)
def _json_group_array(element: json_list, compiler: Any, **kw: Any) -> str:
    return f"json_group_array({compiler.process(element.clauses, **kw)})"


@compiles(json_list, "postgresql")
def _json_agg(element: json_list, compiler: Any, **kw: Any) -> str:
    return f"json_agg({compiler.process(element.clauses, **kw)})"
