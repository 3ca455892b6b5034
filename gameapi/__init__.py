"""The game API: what a game imports from the framework (see FRAMEWORK.md)."""

from __future__ import annotations

from gameapi.game import Game, PlaceTemplate, Resource, SnapshotPart
from gameapi.stocks import Stocks, stocks_for, stocks_of

__all__ = ["Game", "PlaceTemplate", "Resource", "SnapshotPart", "Stocks", "stocks_for", "stocks_of"]
