"""``load_game``: the one way every process and CLI command finds the game it runs.

``GAME`` names an importable package (on ``PYTHONPATH`` or installed); its
``world`` module defines ``GAME = gameapi.Game(...)``. Anything wrong is a
``ConfigError`` naming the module and what is missing, raised at start, so a
process stops with one line (exit 2) instead of answering 500 later.
"""

from __future__ import annotations

import functools
import importlib
import re

from common.errors import ConfigError
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from gameapi.game import Game
from gameapi.routes import CommandRoute, QueryRoute, check_path

_GAME_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def load_game(game: str) -> Game:
    """The ``Game`` of package ``game`` (the ``GAME`` setting), checked, loaded once."""
    return _load(game)


@functools.cache
def _load(game: str) -> Game:
    if _GAME_NAME.fullmatch(game) is None:
        raise ConfigError(f"GAME={game!r} is not a Python package name")
    module_name = f"{game}.world"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigError(
                f"GAME={game}: cannot import {module_name}: no module named {exc.name!r} "
                "(put the game's parent directory on PYTHONPATH or install the package)"
            ) from None
        raise ConfigError(f"GAME={game}: importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise ConfigError(
            f"GAME={game}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    found = getattr(module, "GAME", None)
    if not isinstance(found, Game):
        raise ConfigError(f"GAME={game}: {module_name} defines no GAME = gameapi.Game(...)")
    _check(found, f"GAME={game}: {module_name}")
    return found


def _check(game: Game, where: str) -> None:
    if not game.resources:
        raise ConfigError(f"{where}: GAME declares no resources")
    names = [r.name for r in game.resources]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: GAME declares a resource twice: {names}")
    paths: set[tuple[str, str]] = set()
    for kind, routes in (("commands", game.commands), ("queries", game.queries)):
        expected = CommandRoute if kind == "commands" else QueryRoute
        for route in routes:
            if not isinstance(route, expected):
                name = expected.__name__
                raise ConfigError(f"{where}: GAME.{kind} holds {route!r}, not a {name}")
            problem = check_path(route.path)
            if problem:
                raise ConfigError(f"{where}: {kind} path {route.path!r} {problem}")
            if (kind, route.path) in paths:
                raise ConfigError(f"{where}: two {kind} at path {route.path!r}")
            paths.add((kind, route.path))


def handler_registry(game: Game, settings: Settings) -> HandlerRegistry:
    """A registry with the game's handlers: the task server runs them, and the web tier
    refuses to schedule a kind that is not in it."""
    registry = HandlerRegistry()
    if game.register_handlers is not None:
        try:
            game.register_handlers(registry, settings)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"GAME={settings.game}: registering its handlers failed: {exc}"
            ) from None
    return registry
