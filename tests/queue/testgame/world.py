"""The queue tests' game as the framework loads it (``GAME=tests.queue.testgame``): the
reference game's stock layout (the tests' databases have it) and the handlers below."""

from __future__ import annotations

from gameapi import Game
from refgame.world import DECLARED_RESOURCES, new_place
from tests.queue.testgame.handlers import register

GAME = Game(
    name="testgame",
    resources=DECLARED_RESOURCES,
    new_place=new_place,  # type: ignore[arg-type]
    register_handlers=lambda registry, _settings: register(registry),
)
