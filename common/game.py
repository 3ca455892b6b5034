"""Loading the game a world runs: the framework never imports a game by name.

A game is a Python package (``GAME``, default ``refgame``) with these modules:
``world`` (``village_template(world_speed)``), ``handlers``
(``register(registry)``: its timed-event handlers) and ``commands`` (the
player commands the web tier exposes).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from common.errors import ConfigError


def load_game_module(game: str, module: str) -> ModuleType:
    try:
        return importlib.import_module(f"{game}.{module}")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"GAME: cannot import {game}.{module} ({exc})") from None
