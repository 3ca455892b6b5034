"""No resource, unit, ship or building name of either game in the framework's code.

The framework builds everything game-specific from the game's declaration
(``gameapi.Game``): a name of refgame's or the space game's in ``common/``, ``db/``,
``gameserver/``, ``webfront/`` (its browser SDK and pages too) or ``gameapi/`` is a
rule of one game written into all of them. Migrations already applied
(``db/migrations/versions``) are history and keep their names.
"""

from __future__ import annotations

import re
from pathlib import Path

from examples.spacegame import economy as space_economy
from examples.spacegame.ships import SHIPS
from refgame.buildings import BUILDINGS
from refgame.resources import RESOURCES, STOCKS
from refgame.units import UNITS

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK = ("common", "db", "gameserver", "webfront", "gameapi")
HISTORY = (ROOT / "db" / "migrations" / "versions",)
SOURCES = {".py", ".lua", ".sql", ".md", ".toml", ".yaml", ".yml", ".json", ".txt", ".mako"}
SOURCES |= {".js", ".html", ".css"}


def game_names() -> set[str]:
    refgame = set(RESOURCES) | set(STOCKS.caps) | set(UNITS) | set(BUILDINGS)
    space = set(space_economy.RESOURCES) | set(space_economy.BUILDINGS) | set(SHIPS)
    return refgame | space | set(space_economy.RESEARCH)


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
    assert {"metal", "deuterium", "light_fighter", "shipyard"} <= names
    assert len(framework_files()) > 50


def test_no_game_name_in_the_framework() -> None:
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(game_names()))) + r")\b", re.I)
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
        for path in framework_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not hits, "a game's names in the framework:\n" + "\n".join(hits)
