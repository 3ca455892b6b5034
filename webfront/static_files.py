"""Where the browser client's files come from: the game's own, or the framework's generic page.

The framework serves its SDK (``static/sdk/``) at ``/sdk/{filename}`` for every
game. A game that ships a browser client keeps it in its package's ``static/``
folder (with an ``index.html``); the web tier then serves that folder, subfolders
included, at ``/static/{filename}`` and its ``index.html`` at ``/``. A game without one gets
the generic page (``static/generic/``) there instead, so it is playable from
its first command on.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from common.errors import ConfigError

FRAMEWORK_STATIC = Path(__file__).with_name("static")
SDK_DIR = FRAMEWORK_STATIC / "sdk"
GENERIC_DIR = FRAMEWORK_STATIC / "generic"
INDEX = "index.html"


def game_static_dir(game_package_name: str) -> Path | None:
    """The ``static/`` folder inside the game's package, or None when it has none."""
    try:
        package = importlib.import_module(game_package_name)
    except ImportError as exc:
        raise ConfigError(f"GAME: cannot import {game_package_name} ({exc})") from None
    # a regular package has one folder, a namespace package may have several
    for folder in getattr(package, "__path__", []):
        candidate = Path(folder) / "static"
        if candidate.is_dir():
            return candidate
    return None


def client_dir(game_package_name: str) -> Path:
    """The folder served at ``/static/``: the game's client, else the generic page."""
    folder = game_static_dir(game_package_name)
    if folder is None:
        return GENERIC_DIR
    if not (folder / INDEX).is_file():
        raise ConfigError(
            f"GAME: {folder} has no {INDEX}; add the client's page there or remove the folder "
            "to get the framework's generic page"
        )
    return folder
