"""The reference game as the framework loads it (``GAME``), and its new villages.

Every building kind gets a row (level 0 where not built), so an upgrade is an
UPDATE. Rates come from ``economy.village_rates`` and caps from
``economy.village_caps``, so a fresh village is consistent with the rules. Bots
start with troops so attacks happen in load tests; if their upkeep exceeds the
crop production (a world speed below 1), the starvation rule trims them first.
"""

from __future__ import annotations

from db.worldgen import VillageTemplate
from gameapi.game import Game, Resource
from refgame import admin, commands, handlers
from refgame.buildings import BUILDINGS
from refgame.economy import starve, total_upkeep, village_caps, village_rates
from refgame.resources import RESOURCES

__all__ = [
    "GAME",
    "STARTING_BUILDINGS",
    "STARTING_STOCK",
    "STARTING_TROOPS",
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
}
# wood, clay and iron fill the warehouse, crop the granary; crop's net rate is negative
# when troops eat more than the fields grow (then ``state.STARVATION`` kills some)
DECLARED_RESOURCES = (
    Resource("wood", cap="warehouse"),
    Resource("clay", cap="warehouse"),
    Resource("iron", cap="warehouse"),
    Resource("crop", cap="granary", may_decline=True),
)
STARTING_STOCK = 750  # whole units of each resource
# Upkeep 39 crop/hour against 45 of production at world speed 1.
STARTING_TROOPS: dict[str, int] = {
    "legionnaire": 15,
    "praetorian": 10,
    "imperian": 5,
    "equites_imperatoris": 3,
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
        warehouse_cap=warehouse_cap,
        granary_cap=granary_cap,
    )


def player_village_template(world_speed: float) -> VillageTemplate:
    """A human player's first village: like a bot's, but without troops (train them)."""
    return village_template(world_speed, with_troops=False)


def new_place(world_speed: float, bot: bool) -> VillageTemplate:
    """A generated bot's village (with troops) or a new player's (train them)."""
    return village_template(world_speed, with_troops=bot)


GAME = Game(
    name="refgame",
    resources=DECLARED_RESOURCES,
    new_place=new_place,  # type: ignore[arg-type]
    register_handlers=handlers.register,
    commands=commands.ROUTES,
    rule_errors=commands.RULE_ERRORS,
    admin_timeline=admin.admin_timeline,
    replay_report=admin.replay_report,
)
