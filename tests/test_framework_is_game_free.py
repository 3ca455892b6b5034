"""No resource, unit or building name of the reference game in the framework's code.

The framework builds everything game-specific from the game's declaration
(``gameapi.Game``): a name of refgame's in ``common/``, ``db/``, ``gameserver/``,
``webfront/`` or ``gameapi/`` is a rule of one game written into all of them.
Migrations already applied (``db/migrations/versions``) are history and keep their
names. ``webfront/static`` is the reference game's browser client, which is not the
framework's yet either (it moves to the game with the shared browser SDK), so it is
not searched here.
"""

from __future__ import annotations

import re
from pathlib import Path

from refgame.buildings import BUILDINGS
from refgame.resources import RESOURCES, STOCKS
from refgame.units import UNITS

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK = ("common", "db", "gameserver", "webfront", "gameapi")
HISTORY = (ROOT / "db" / "migrations" / "versions", ROOT / "webfront" / "static")
SOURCES = {".py", ".lua", ".sql", ".md", ".toml", ".yaml", ".yml", ".json", ".txt", ".mako"}


def game_names() -> set[str]:
    return set(RESOURCES) | set(STOCKS.caps) | set(UNITS) | set(BUILDINGS)


def framework_files() -> list[Path]:
    return sorted(
        p
        for top in FRAMEWORK
        for p in (ROOT / top).rglob("*")
        if p.is_file()
        and p.suffix in SOURCES
        and not any(p.is_relative_to(skip) for skip in HISTORY)
    )


def test_the_names_are_there_to_find() -> None:
    names = game_names()
    assert {"wood", "crop", "granary", "legionnaire", "barracks"} <= names
    assert len(framework_files()) > 50


def test_no_game_name_in_the_framework() -> None:
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(game_names()))) + r")\b", re.I)
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
        for path in framework_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not hits, "the reference game's names in the framework:\n" + "\n".join(hits)
