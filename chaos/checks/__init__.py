"""The invariants a chaos run checks, with SQL against the final database and the ledger.

Sources of truth, none of them the code under test's own bookkeeping alone:

- the *baseline*: every village's ``village_stock`` row, buildings and troops, read
  before the load started;
- the *ledger*: every command the population sent and the answer it got;
- the database at the end (after everything due ran): events, orders, marches,
  troops, stocks, reports, and ``idempotent_responses`` (the command's own
  record of its time; a build or training answer says when it spent: ``spent_ms``).

Each check lists what it verifies (``Check.what``); a violation is one sentence.
"""

from chaos.checks.base import Check
from chaos.checks.database import Baseline, Final, read_baseline, read_final
from chaos.checks.invariants import (
    check_answers,
    check_battles,
    check_events_once,
    check_ledger,
    check_levels,
    check_marches,
    check_non_negative,
    check_pending,
    check_troops,
)
from chaos.checks.outside import check_dead_letters, check_logs
from chaos.checks.resources import check_resources
from chaos.checks.run import CheckReport, run_checks
from chaos.checks.social import check_alliances
from chaos.checks.trades import check_trades
from chaos.checks.world import World, parse_world

__all__ = [
    "Baseline",
    "Check",
    "CheckReport",
    "Final",
    "World",
    "check_alliances",
    "check_answers",
    "check_battles",
    "check_dead_letters",
    "check_events_once",
    "check_ledger",
    "check_levels",
    "check_logs",
    "check_marches",
    "check_non_negative",
    "check_pending",
    "check_resources",
    "check_trades",
    "check_troops",
    "parse_world",
    "read_baseline",
    "read_final",
    "run_checks",
]
