"""The mini game as the framework loads it: the reference game's villages and stocks, one
test command and the one event kind that command schedules."""

from __future__ import annotations

from gameapi import Event, Game, HandlerRegistry, Tx
from refgame.models import Base
from refgame.snapshot import SNAPSHOT_PARTS
from refgame.world import DECLARED_RESOURCES, MIGRATIONS, new_place
from tests.web.minigame.commands import ROUTES, RULE_ERRORS


async def _noop(tx: Tx, events: list[Event]) -> None:
    """The test command's event: it only has to be a kind the game handles."""


def register(registry: HandlerRegistry, _settings: object) -> None:
    registry.register("test.noop", _noop)


GAME = Game(
    name="minigame",
    resources=DECLARED_RESOURCES,
    new_place=new_place,
    migrations=MIGRATIONS,  # the tests' databases have the reference game's schema
    snapshot_parts=SNAPSHOT_PARTS,
    tables=Base.metadata,
    register_handlers=register,
    commands=ROUTES,
    rule_errors=RULE_ERRORS,
)
