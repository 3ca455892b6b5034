"""The framework's public API for games: a game imports from here and nowhere else.

See ``gameapi.game`` for what a game declares, README "Writing a game" for a
walk-through and ``examples/`` for two games built on nothing else.
"""

from __future__ import annotations

from common.amounts import SCALE, to_fixed, to_units
from common.queue.events import Event
from common.queue.handlers import Handler, HandlerRegistry
from common.queue.policy import RetryPolicy
from common.queue.tx import StaleRead, Tx, UnknownEventKind, WorldShape
from db.driver import Rows
from db.models import NAMING, Player, Village
from gameapi.aggregates import json_list
from gameapi.bench import GameBench
from gameapi.game import Game, PlaceTemplate, Resource, SnapshotPart
from gameapi.loading import handler_registry, load_game
from gameapi.places import (
    PLACE_ERRORS,
    NotYourPlace,
    OffMap,
    PlaceTaken,
    check_on_map,
    found_place,
    own_place,
)
from gameapi.routes import CommandRoute, QueryRoute
from gameapi.stocks import RateChange, Stocks, stocks_for, stocks_of
from gameserver.jobs import JobContext
from webfront.validation import Id, Out, Query, StrictBody

places = Village.__table__
players = Player.__table__

__all__ = [
    "NAMING",
    "PLACE_ERRORS",
    "SCALE",
    "CommandRoute",
    "Event",
    "Game",
    "GameBench",
    "Handler",
    "HandlerRegistry",
    "Id",
    "JobContext",
    "NotYourPlace",
    "OffMap",
    "Out",
    "PlaceTaken",
    "PlaceTemplate",
    "Query",
    "QueryRoute",
    "RateChange",
    "Resource",
    "RetryPolicy",
    "Rows",
    "SnapshotPart",
    "StaleRead",
    "Stocks",
    "StrictBody",
    "Tx",
    "UnknownEventKind",
    "WorldShape",
    "check_on_map",
    "found_place",
    "handler_registry",
    "json_list",
    "load_game",
    "own_place",
    "places",
    "players",
    "stocks_for",
    "stocks_of",
    "to_fixed",
    "to_units",
]
