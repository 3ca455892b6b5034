"""The reference game: a Travian-like ruleset built on the framework's extension points.

Pure rules, no I/O: constants tables a game developer edits (``buildings.BUILDINGS``,
``units.UNITS``, the level tables) and functions that turn them into costs,
durations, rates, battles and reports. The DB-backed commands and event
handlers call these; the framework core never imports this package.

Modules: ``resources`` (numbers, costs, world speed), ``buildings``, ``units``,
``economy`` (rates, caps, stocks, starvation), ``travel`` (marches, recall),
``battle`` (fight, loot, reports), ``world`` (a new village), ``errors``.
"""

from __future__ import annotations

# Stored in every report body; raise it when a rule change makes old reports replay differently.
RULESET_VERSION = 1
