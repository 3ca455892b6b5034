"""The queue tests' game as the framework loads it (``GAME=tests.queue.testgame``): the
reference game's stock layout (the tests' databases have it) and the handlers below."""

from __future__ import annotations

from gameapi import Game
from refgame.models import Base
from refgame.snapshot import SNAPSHOT_PARTS
from refgame.world import DECLARED_RESOURCES, MIGRATIONS, new_place
from tests.queue.testgame.handlers import register

GAME = Game(
    name="testgame",
    resources=DECLARED_RESOURCES,
    new_place=new_place,
    migrations=MIGRATIONS,  # the tests' databases have the reference game's schema
    snapshot_parts=SNAPSHOT_PARTS,
    tables=Base.metadata,
    register_handlers=lambda registry, _settings: register(registry),
)
