"""Many commands' closing statements as one set-based statement (PostgreSQL).

A command's closing statement (``db.driver.write_all``) is at most one guard (a
conditional UPDATE or DELETE with RETURNING: "the stock is still as I read it") and
the rows it inserts. N closings of one shape (the same statements with the same
parameter names) become one statement whose cost hardly grows with N, where N
statements of their own each pay a round trip, an executor start per part and a commit:

- the guard runs once for all: its parameters become columns of
  ``unnest(:p1[], :p2[], ..., :ordinal[])`` joined in its FROM, and it returns the
  ordinals (the closings' positions in the batch) of the rows it touched;
- each insert is one ``INSERT ... SELECT`` from ``unnest`` of its values, taking only
  the rows of the closings whose guard held;
- the statement returns the ordinals whose guard held.

Each closing's effect is what its own statement would have had: its rows are written
exactly when its guard touched a row. Two closings whose guards meet the same row (two
commands spending from one village) touch it once, so one of them is told its guard
did not hold and runs again, as it would after losing to another transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Integer, bindparam, column, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.expression import Executable, Insert
from sqlalchemy.sql.visitors import iterate, replacement_traverse
from sqlalchemy.types import NullType, TypeEngine

ORDINAL = "set_ordinal"  # a closing's position in the batch, in every unnest


def statement(
    writes: Sequence[tuple[Insert, Sequence[str]]], guard: Executable | None
) -> Executable | None:
    """The set-based statement for closings that insert with ``writes`` (each an insert
    and the names of the columns it gives) behind ``guard`` (None: no guard).

    Its parameters are named ``g_<name>`` (the guard's), ``w<i>_<column>`` (the i-th
    insert's) and ``<prefix>_set_ordinal``, each an array with one item per closing
    (``arguments``). It returns one row per closing whose guard held (its ordinal); with
    no guard, it returns nothing and every closing held. None: a parameter of ``guard``
    has no type to make an array of (give its ``bindparam`` a ``type_``)."""
    held = None
    if guard is not None:
        binds = _binds(guard)
        if any(isinstance(kind, NullType) for kind in binds.values()):
            return None
        rows = _unnest("g", binds)

        def column_for(element: Any, **_: Any) -> Any:
            if isinstance(element, BindParameter) and element.key in binds:
                return rows.c[element.key]
            return None

        joined: Any = replacement_traverse(cast(Any, guard), {}, column_for)
        held = joined.returning(rows.c[ORDINAL]).cte("g")
    inserts = []
    for i, (insert, names) in enumerate(writes):
        columns = insert.table.c  # type: ignore[attr-defined]
        rows = _unnest(f"w{i}", {name: columns[name].type for name in names})
        picked = select(*(rows.c[name] for name in names))
        if held is not None:
            picked = picked.where(rows.c[ORDINAL].in_(select(held.c[ORDINAL])))
        inserts.append(insert.from_select(list(names), picked, include_defaults=False))
    if held is not None:
        main: Any = select(held.c[ORDINAL])
        first = inserts
    else:
        *first, main = inserts
    for i, insert in enumerate(first):
        main = main.add_cte(insert.cte(f"w{i}"))
    return main  # type: ignore[no-any-return]


def arguments(
    writes: Sequence[Sequence[Mapping[str, Any]]],
    guards: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """``statement``'s parameters: ``writes[c][i]`` is the values of closing c's i-th
    insert, ``guards[c]`` the parameters of its guard (None: no guard)."""
    ordinals = list(range(len(writes)))
    params: dict[str, Any] = {}
    if guards is not None:
        params["g_" + ORDINAL] = ordinals
        for name in guards[0]:
            params[f"g_{name}"] = [g[name] for g in guards]
    for i in range(len(writes[0])):
        params[f"w{i}_{ORDINAL}"] = ordinals
        for name in writes[0][i]:
            params[f"w{i}_{name}"] = [w[i][name] for w in writes]
    return params


def lock_order(guard: Executable) -> list[str]:
    """The names of ``guard``'s parameters in the order its WHERE clause names them: the
    closings of a batch are sorted by their values, so two batches that meet the same rows
    (two writers, two web processes) lock them in the same order, and neither waits for
    the other in a deadlock (the key a guard finds its row by comes first in its WHERE)."""
    where = getattr(guard, "whereclause", None)
    if where is None:
        return []
    names = [
        element.key
        for element in iterate(where)
        if isinstance(element, BindParameter) and not element.unique
    ]
    return list(dict.fromkeys(names))


def _binds(guard: Executable) -> dict[str, TypeEngine[Any]]:
    """The named parameters of ``guard`` and their types."""
    return {
        element.key: element.type
        for element in iterate(guard)  # type: ignore[arg-type]
        if isinstance(element, BindParameter) and not element.unique
    }


def _unnest(prefix: str, types: Mapping[str, TypeEngine[Any]]) -> Any:
    """``unnest(:<prefix>_<name>[], ..., :<prefix>_set_ordinal[]) AS <prefix>_rows(...)``."""
    names = [*types, ORDINAL]
    kinds = {**types, ORDINAL: Integer()}
    arrays = [bindparam(f"{prefix}_{name}", type_=ARRAY(kinds[name])) for name in names]
    return (
        func.unnest(*arrays)
        .table_valued(*(column(name, kinds[name]) for name in names))
        .render_derived(name=f"{prefix}_rows")
    )
