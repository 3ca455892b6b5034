"""The reference game as the framework loads it (``GAME``), and its new villages.

Every building kind gets a row (level 0 where not built), so an upgrade is an
UPDATE. Rates come from ``economy.village_rates`` and caps from
``economy.village_caps``, so a fresh village is consistent with the rules. Bots
start with troops so attacks happen in load tests; if their upkeep exceeds the
crop production (a world speed below 1), the starvation rule trims them first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import Table

from common.settings import Settings
from gameapi import HandlerRegistry
from gameapi.game import Game, PlaceTemplate
from refgame import (
    admin,
    alliances,
    bench,
    commands,
    handlers,
    market,
    messages,
    rankings,
    rules,
    settling,
)
from refgame.buildings import BUILDINGS
from refgame.economy import starve, total_upkeep, village_caps, village_rates
from refgame.models import MIGRATIONS, Base, Building, Troop
from refgame.population import village_population
from refgame.resources import RESOURCE_TYPES, RESOURCES
from refgame.snapshot import SNAPSHOT_PARTS

__all__ = [
    "DECLARED_RESOURCES",
    "GAME",
    "MIGRATIONS",
    "STARTING_BUILDINGS",
    "STARTING_STOCK",
    "STARTING_TROOPS",
    "VillageTemplate",
    "player_village_template",
    "village_caps",
    "village_rates",
    "village_template",
]

STARTING_BUILDINGS: dict[str, int] = {
    "woodcutter": 2,
    "clay_pit": 2,
    "iron_mine": 2,
    "cropland": 2,
    "main_building": 3,
    "warehouse": 1,
    "granary": 1,
    "rally_point": 1,
    "barracks": 1,
    "marketplace": 1,  # one merchant: players can trade from the start
}
DECLARED_RESOURCES = RESOURCE_TYPES  # wood, clay, iron (warehouse), crop (granary, may decline)
STARTING_STOCK = 750  # whole units of each resource
# Upkeep 39 crop/hour against 45 of production at world speed 1.
STARTING_TROOPS: dict[str, int] = {
    "legionnaire": 15,
    "praetorian": 10,
    "imperian": 5,
    "equites_imperatoris": 3,
}


@dataclass(frozen=True)
class VillageTemplate(PlaceTemplate):
    """A reference-game village: the framework's ``PlaceTemplate`` plus what it is made of."""

    buildings: Mapping[str, int] = field(default_factory=dict)
    troops: Mapping[str, int] = field(default_factory=dict)

    @property
    def warehouse_cap(self) -> int:
        return self.caps["warehouse"]

    @property
    def granary_cap(self) -> int:
        return self.caps["granary"]


def _rows(
    buildings: Mapping[str, int], troops: Mapping[str, int], village_id: int
) -> dict[Table, Sequence[dict[str, Any]]]:
    """A new village's own rows: every building kind's level and the troops at home."""
    return {
        Building.__table__: [  # type: ignore[dict-item]
            {"village_id": village_id, "kind": kind, "level": level}
            for kind, level in buildings.items()
        ],
        Troop.__table__: [  # type: ignore[dict-item]
            {"village_id": village_id, "home_village_id": village_id, "unit": u, "count": n}
            for u, n in troops.items()
        ],
    }


def village_template(world_speed: float, *, with_troops: bool = True) -> VillageTemplate:
    """The starting village at ``world_speed``; ``with_troops=False`` for a human player's."""
    buildings = {kind: STARTING_BUILDINGS.get(kind, 0) for kind in BUILDINGS}
    troops = dict(STARTING_TROOPS) if with_troops else {}
    rates = village_rates(buildings, total_upkeep(troops), world_speed)
    if rates["crop"] < 0:
        dead = starve(troops, -rates["crop"])
        troops = {u: n - dead.get(u, 0) for u, n in troops.items() if n > dead.get(u, 0)}
        rates = village_rates(buildings, total_upkeep(troops), world_speed)
    warehouse_cap, granary_cap = village_caps(buildings)
    return VillageTemplate(
        buildings=buildings,
        troops=troops,
        stock={r: STARTING_STOCK for r in RESOURCES},
        rates=rates,
        caps={"warehouse": warehouse_cap, "granary": granary_cap},
        rows=partial(_rows, buildings, troops),
    )


def player_village_template(world_speed: float) -> VillageTemplate:
    """A human player's first village: like a bot's, but without troops (train them)."""
    return village_template(world_speed, with_troops=False)


def new_place(world_speed: float, bot: bool) -> VillageTemplate:
    """A generated bot's village (with troops) or a new player's (train them)."""
    return village_template(world_speed, with_troops=bot)


def register_handlers(registry: HandlerRegistry, settings: Settings | None = None) -> None:
    """Every event kind of the game: ``handlers``, settlers founding villages, merchants."""
    handlers.register(registry, settings)
    settling.register(registry, player_village_template)
    market.register(registry, settings)


GAME = Game(
    name="refgame",
    resources=RESOURCE_TYPES,
    new_place=new_place,
    register_handlers=register_handlers,
    commands=[
        *commands.ROUTES,
        *rules.ROUTES,
        *settling.ROUTES,
        *market.ROUTES,
        *alliances.ROUTES,
        *messages.ROUTES,
    ],
    queries=[*alliances.QUERIES, *messages.QUERIES, *rankings.QUERIES],
    rule_errors=commands.RULE_ERRORS,
    tables=Base.metadata,
    migrations=MIGRATIONS,
    snapshot_parts=SNAPSHOT_PARTS,
    place_size=village_population,
    admin_timeline=admin.admin_timeline,
    replay_report=admin.replay_report,
    bench=bench.workload(STARTING_TROOPS),
)
