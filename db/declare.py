"""What a game declares that the DB tier builds from: its resources and a new place's rows.

``gameapi`` re-exports both; they live here so the DB tier (``db.stock``,
``db.worldgen``, ``db.accounts``) depends on nothing above it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table

_NAME = re.compile(r"[a-z][a-z0-9_]{0,23}")


@dataclass(frozen=True)
class Resource:
    """A resource that places produce over time, stored fixed-point in ``village_stock``.

    ``cap`` names the storage that limits it: resources sharing a cap share one
    ``<cap>_cap`` column (several resources kept in one storage building share its
    cap). ``may_decline``: its rate may be negative (food eaten by an army);
    its stock then stops at zero and the game decides what running out means
    (the reference game starves troops). Columns: ``<name>``, ``<name>_rate``.
    """

    name: str
    cap: str
    may_decline: bool = False

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("cap", self.cap)):
            if _NAME.fullmatch(value) is None:
                raise ValueError(f"resource {what} {value!r}: lower-case letters, digits, '_'")


@dataclass(frozen=True)
class PlaceTemplate:
    """What a new place (village, planet) starts with; amounts in whole units.

    ``stock`` and ``rates`` (units per hour) by resource name, ``caps`` by cap
    name; ``rows(place_id)`` gives the game's own rows for the new place
    (buildings, troops) as ``{table: [row, ...]}``, inserted with it.
    """

    stock: Mapping[str, int] = field(default_factory=dict)
    rates: Mapping[str, int] = field(default_factory=dict)
    caps: Mapping[str, int] = field(default_factory=dict)
    rows: Callable[[int], Mapping[Table, Sequence[dict[str, Any]]]] | None = None
