"""What the framework loads (``GAME=examples.harvest``): one resource, one command, one event."""

from __future__ import annotations

from examples.harvest import commands, handlers
from gameapi import Game, PlaceTemplate, Resource

RESOURCES = (Resource("grain", cap="barn"),)


def new_place(world_speed: float, bot: bool) -> PlaceTemplate:
    """Every farm starts alike: 100 grain, growing 60 an hour, a barn for 1,000."""
    return PlaceTemplate(stock={"grain": 100}, rates={"grain": 60}, caps={"barn": 1_000})


GAME = Game(
    name="harvest",
    resources=RESOURCES,
    new_place=new_place,
    register_handlers=handlers.register,
    commands=commands.ROUTES,
    rule_errors=(commands.NotEnoughGrain,),
)
