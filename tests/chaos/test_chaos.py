"""The bounded chaos run: the real stack on a private PostgreSQL and Redis, a scripted
population, one fault of each kind, then every invariant check with 0 violations.

``python -m chaos --minutes 10`` is the full version (``chaos/runner.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.faults import KINDS
from chaos.runner import RunConfig, format_summary, run

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
async def test_bounded_chaos_run_finds_no_violation(tmp_path: Path) -> None:
    summary = await run(RunConfig.bounded(workdir=tmp_path / "chaos"))
    text = format_summary(summary)
    assert summary.violations == 0, text
    assert all(summary.fault_counts[kind] >= 1 for kind in KINDS), text
    activity = summary.activity
    assert activity["marches_sent"] >= 30 and activity["battles"] >= 10, text
    assert activity["builds_committed"] >= 10 and activity["trainings_committed"] >= 3, text
    assert activity["marches_recalled"] >= 1 and activity["reinforcements_arrived"] >= 1, text
    assert activity["garbage_entries"] >= 8, text
    assert sum(summary.events_run.values()) >= 100, text
    assert {c["name"] for c in summary.checks} >= {
        "every_event_ran_exactly_once",
        "resources_exact",
        "troops_conserved",
        "battle_reports_replay",
        "malformed_entries_dead_lettered",
    }
    assert all(c["checked"] > 0 for c in summary.checks), text
