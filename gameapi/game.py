"""What a game is, to the framework: one ``Game`` object in ``<GAME>.world``.

A game is an importable Python package (``GAME``, a dotted module name such as
``refgame`` or ``examples.harvest``) whose ``world`` module defines
``GAME = Game(...)``. Every process and CLI command loads it through
``load_game`` (``gameapi.loading``), so they all run the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import MetaData, Select, Table

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue.handlers import HandlerRegistry
    from common.settings import Settings

_NAME = re.compile(r"[a-z][a-z0-9_]{0,23}")


@dataclass(frozen=True)
class Resource:
    """A resource that places produce over time, stored fixed-point in ``village_stock``.

    ``cap`` names the storage that limits it: resources sharing a cap share one
    ``<cap>_cap`` column (the reference game's wood, clay and iron share its
    warehouse). ``may_decline``: its rate may be negative (crop eaten by troops);
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


@dataclass(frozen=True)
class SnapshotPart:
    """A part of every place in a player's snapshot, read from the game's tables.

    ``query()`` returns a Select whose first column is labelled ``place_id``
    (the place whose snapshot gets the row); the framework keeps the rows of
    the viewing player's places. ``shape="list"``: the place gets
    ``key: [row dict without place_id, ...]``; ``shape="map"``: ``key:
    {second column: third column}``. ``view(row, viewer_id)`` may rewrite or
    hide (return None) a row for the viewing player.
    """

    key: str
    query: Callable[[], Select[Any]]
    shape: str = "list"
    view: Callable[[dict[str, Any], int], dict[str, Any] | None] | None = None


@dataclass(frozen=True)
class Game:
    """Everything the framework needs from a game. Only ``name``, ``resources`` and
    ``new_place`` are required; a game without handlers or commands is valid.

    A browser client is found by convention: the ``static/`` folder of the game's
    package, with an ``index.html`` (``webfront.static_files``); without one the
    game gets the framework's generic page.
    """

    name: str
    resources: Sequence[Resource]
    # (world_speed, bot) -> what a new player's (bot=False) or a generated bot's place gets
    new_place: Callable[[float, bool], PlaceTemplate]
    register_handlers: Callable[[HandlerRegistry, Settings], None] | None = None
    commands: Sequence[Any] = ()  # CommandRoute
    queries: Sequence[Any] = ()  # QueryRoute: GET /api/<path>
    rule_errors: tuple[type[Exception], ...] = ()
    tables: MetaData | None = None  # the game's own tables (its Alembic branch creates them)
    migrations: Path | None = None  # the game's Alembic versions directory
    snapshot_parts: Sequence[SnapshotPart] = ()
    # the operator console's view of the game (webfront/admin/hooks.py says what they return)
    admin_timeline: (
        Callable[[AsyncSession, int], Awaitable[dict[str, list[dict[str, Any]]]]] | None
    ) = None
    replay_report: Callable[[AsyncSession, int], Awaitable[dict[str, Any] | None]] | None = None
    # a periodic job: (name, every_s, async fn(settings)) run once per world per interval
    jobs: Sequence[tuple[str, float, Callable[..., Awaitable[None]]]] = ()

    def resource_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.resources)
