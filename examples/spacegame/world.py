"""The space game as the framework loads it (``GAME=examples.spacegame``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Table

import gameapi
from examples.spacegame import admin, economy
from examples.spacegame.bench import BENCH
from examples.spacegame.commands import ROUTES
from examples.spacegame.economy import BUILDINGS
from examples.spacegame.errors import RULE_ERRORS
from examples.spacegame.handlers import register_handlers
from examples.spacegame.models import METADATA, Building, Planet, Ships
from examples.spacegame.ships import SHIPS
from examples.spacegame.snapshot import PARTS, QUERIES
from examples.spacegame.state import DECLARED

HERE = Path(__file__).parent
START_STOCK = {"metal": 500, "crystal": 500, "deuterium": 0}
# a generated bot's planet: something to produce and something to defend it
BOT_LEVELS = {"metal_mine": 4, "crystal_mine": 2, "robotics_factory": 1, "shipyard": 1}
BOT_SHIPS = {"light_fighter": 4, "small_cargo": 1}


def new_place(world_speed: float, bot: bool) -> gameapi.PlaceTemplate:
    levels = BOT_LEVELS if bot else {}
    fleet = BOT_SHIPS if bot else {}

    def rows(place_id: int) -> dict[Table, list[dict[str, Any]]]:
        return {
            Planet.__table__: [  # type: ignore[dict-item]
                {"place_id": place_id, "temperature": economy.planet_temperature(place_id)}
            ],
            Building.__table__: [  # type: ignore[dict-item]
                {"place_id": place_id, "name": b, "level": levels.get(b, 0)} for b in BUILDINGS
            ],
            Ships.__table__: [  # type: ignore[dict-item]
                {"place_id": place_id, "name": s, "count": fleet.get(s, 0)} for s in SHIPS
            ],
        }

    # no deuterium synthesizer yet, so the temperature (known with the id) does not matter
    rates = economy.production(levels, 0, world_speed)
    caps = economy.capacities(levels)
    return gameapi.PlaceTemplate(stock=START_STOCK, rates=rates, caps=caps, rows=rows)


GAME = gameapi.Game(
    name="spacegame",
    resources=DECLARED,
    new_place=new_place,
    register_handlers=register_handlers,
    commands=ROUTES,
    queries=QUERIES,
    rule_errors=RULE_ERRORS,
    tables=METADATA,
    migrations=HERE / "migrations" / "versions",
    snapshot_parts=PARTS,
    admin_timeline=admin.timeline,
    replay_report=admin.replay_report,
    bench=BENCH,
)
