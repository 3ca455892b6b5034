"""The stocks of a game: ``stocks_of(game)`` is the ``village_stock`` table and statements
built from ``game.resources`` (``db.stock.Stocks``), one per declaration."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from db.stock import RateChange, Stocks
from gameapi.game import Game, Resource

__all__ = ["RateChange", "Stocks", "stocks_for", "stocks_of"]


@functools.cache
def _stocks(resources: tuple[Resource, ...]) -> Stocks:
    return Stocks(resources)


def stocks_for(resources: Sequence[Resource]) -> Stocks:
    """The one ``Stocks`` of this declaration (the same object for an equal declaration, so
    its prepared statements are built once)."""
    return _stocks(tuple(resources))


def stocks_of(game: Game) -> Stocks:
    return stocks_for(game.resources)
