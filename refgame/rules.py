"""The rule tables a client needs to show costs and times before a player commits.

``POST /api/rules`` answers the buildings' cost and duration of every level, the
units' cost, training time, upkeep and stats, the march speeds, the world speed,
the settlers a new village takes and the map's radius, the merchants' capacity and
speed, all computed by the same functions the commands use. It is a command route
only because commands are the routes that know the world speed (a query gets a
session alone); it reads nothing and changes nothing. A client fetches it once and
keeps it: the tables do not change while a world runs.
"""

from __future__ import annotations

from typing import Any

from gameapi import Tx
from gameapi.routes import CommandRoute
from refgame.buildings import (
    BARRACKS_TIME_PCT,
    BUILD_QUEUE_LIMIT,
    BUILDINGS,
    MAIN_BUILDING_TIME_PCT,
    build_cost,
    build_duration_ms,
)
from refgame.resources import MS_PER_SECOND, RESOURCES, scale_duration_ms
from refgame.settling import SETTLERS_TO_FOUND
from refgame.trade import MERCHANT_CAPACITY, MERCHANT_SPEED, MERCHANTS_PER_LEVEL
from refgame.travel import RECALL_WINDOW_FRACTION
from refgame.units import MAX_TRAIN_PER_ORDER, TRAINING_QUEUE_LIMIT, UNITS
from webfront.validation import StrictBody


class RulesBody(StrictBody):
    """No fields: the rules are the same for every player."""


def rule_tables(world_speed: float, map_radius: int | None = None) -> dict[str, Any]:
    """The tables at ``world_speed``.

    A building level's ``duration_ms`` is at main building level 1; at level m it
    takes ``main_building_time_pct[m]`` percent of it. A unit's ``time_ms`` is one
    unit at barracks level 1; ``barracks_time_pct`` scales it the same way. A march
    takes ``distance × 3,600,000 / (slowest speed × world_speed)`` ms. Founding a
    village takes ``settlers_to_found`` settlers, on a free field within ``map_radius``.
    """
    buildings = {
        spec.kind: {
            "max_level": spec.max_level,
            "requires": dict(spec.requires),
            "levels": [
                {
                    "level": level,
                    "cost": build_cost(spec.kind, level).as_dict(),
                    "duration_ms": build_duration_ms(spec.kind, level, 1, world_speed),
                }
                for level in range(1, spec.max_level + 1)
            ],
        }
        for spec in BUILDINGS.values()
    }
    units = {
        spec.name: {
            "category": spec.category,
            "attack": spec.attack,
            "defense_infantry": spec.defense_infantry,
            "defense_cavalry": spec.defense_cavalry,
            "speed": spec.speed,
            "carry": spec.carry,
            "upkeep": spec.upkeep,
            "cost": spec.cost.as_dict(),
            "time_ms": scale_duration_ms(spec.time_s * MS_PER_SECOND, world_speed),
            "barracks_level": spec.barracks_level,
            "trained_in": spec.trained_in,
        }
        for spec in UNITS.values()
    }
    return {
        "world_speed": world_speed,
        "resources": list(RESOURCES),
        "buildings": buildings,
        "main_building_time_pct": list(MAIN_BUILDING_TIME_PCT),
        "build_queue_limit": BUILD_QUEUE_LIMIT,
        "units": units,
        "barracks_time_pct": list(BARRACKS_TIME_PCT),
        "training_queue_limit": TRAINING_QUEUE_LIMIT,
        "max_train_per_order": MAX_TRAIN_PER_ORDER,
        "recall_window_fraction": float(RECALL_WINDOW_FRACTION),
        "settlers_to_found": SETTLERS_TO_FOUND,
        "map_radius": map_radius,
        "trade": {
            "merchants_per_level": MERCHANTS_PER_LEVEL,
            "merchant_capacity": MERCHANT_CAPACITY,
            "merchant_speed": MERCHANT_SPEED,
        },
    }


async def _rules_route(tx: Tx, _player_id: int, _body: RulesBody) -> dict[str, Any]:
    return rule_tables(tx.world_speed, tx.world.map_radius if tx.world else None)


ROUTES = [
    CommandRoute("rules", RulesBody, _rules_route, "The rule tables: costs, durations, unit stats"),
]
