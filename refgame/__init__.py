"""The reference game: a Travian-like ruleset built on the framework's extension points.

The rules are pure functions over constants tables a game developer edits
(``buildings.BUILDINGS``, ``units.UNITS``, the level tables): costs, durations,
rates, battles and reports, with no I/O. Around them sit the parts that touch the
database: the player commands, the timed-event handlers and the state they read
and write. The framework core never imports this package.

Rules: ``resources`` (numbers, costs, world speed), ``buildings``, ``units``,
``economy`` (rates, caps, stocks, starvation), ``travel`` (marches, recall),
``battle`` (fight, loot, reports), ``world`` (a new village), ``errors``.
With I/O: ``commands`` (build, train, march, recall), ``handlers`` (the event kinds),
``state`` (reads and writes inside a caller's transaction), ``batch`` and ``batch_io``
(a batch of events' villages held in memory, read and written per table).
"""

from __future__ import annotations

# Stored in every report body; raise it when a rule change makes old reports replay differently.
RULESET_VERSION = 1
