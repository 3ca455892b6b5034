"""What a game is, to the framework: one ``Game`` object in ``<GAME>.world``.

A game is an importable Python package (``GAME``, a dotted module name such as
``refgame`` or ``examples.harvest``) whose ``world`` module defines
``GAME = Game(...)``. Every process and CLI command loads it through
``load_game`` (``gameapi.loading``), so they all run the same rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, MetaData, Select

from db.declare import PlaceTemplate, Resource
from gameapi.bench import GameBench

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue.handlers import HandlerRegistry
    from common.settings import Settings

# a Select of any columns (the Select of a part's query, whatever its columns' types)
AnySelect = Select[*tuple[Any, ...]]


@dataclass(frozen=True)
class SnapshotPart:
    """A part of a player's snapshot, read from the game's tables.

    ``query()`` returns a Select whose first column is labelled ``place_id`` (the
    place whose snapshot gets the row) or ``player_id`` (a part of the player's
    own, beside ``villages``); the framework keeps the rows of the viewing
    player's places (or the player's own). Its other columns are integers,
    strings or JSON. ``shape="list"``: ``key: [row dict without place_id, ...]``,
    in the order of the row's columns; ``shape="map"``: ``key: {second column:
    third column}``; ``shape="value"``: ``key: second column`` (one row per player
    or place); ``shape="object"``: ``key: row dict without its first column`` (one
    row per player or place; null without one). ``view(row, viewer_id)`` may rewrite
    or hide (return None) a list row or an object for the viewing player. Parts with
    the same key fill one list, ordered together. ``model``: the pydantic model (or
    type) of one list item, map value, value or object, for the documented response.
    """

    key: str
    query: Callable[[], AnySelect]
    shape: str = "list"
    view: Callable[[dict[str, Any], int], dict[str, Any] | None] | None = None
    model: Any = None


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
    # (the places' id column) -> a scalar SQL expression, e.g. a correlated subquery over
    # the game's tables: a place's size as the map shows it (GET /api/map); None: no size
    place_size: Callable[[ColumnElement[int]], ColumnElement[Any]] | None = None
    # the operator console's view of the game (webfront/admin/hooks.py says what they return)
    admin_timeline: (
        Callable[[AsyncSession, int], Awaitable[dict[str, list[dict[str, Any]]]]] | None
    ) = None
    replay_report: Callable[[AsyncSession, int], Awaitable[dict[str, Any] | None]] | None = None
    # the workload of `python -m bench queue --handlers game`: the event kind measured, how
    # to set up N of them due at once and what the run produced (gameapi.bench.GameBench);
    # None: that bench refuses the game
    bench: GameBench | None = None

    def resource_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.resources)
