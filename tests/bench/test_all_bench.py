"""``python -m bench all``: its summary table from the subcommands' figures (no timing)."""

from __future__ import annotations

from typing import Any

from bench.all import summary_rows


def _figures() -> dict[str, Any]:
    web_result = {"latency_ms": {"p99": 12.0}, "connections": 100}
    return {
        "tick": {"db": "sqlite", "villages_per_s": 900_000.0, "bare_villages_per_s": 1e6,
                 "ratio_to_bare": 0.9, "projected_max_villages_p99_under_1s": 2_000_000},
        "queue": {"schedule_per_s": 150_000.0, "raw_zadd_per_s": 200_000.0,
                  "schedule_ratio": 0.75, "dispatch_per_s": 90_000.0, "bare_pop_per_s": 1e6,
                  "dispatch_ratio": 0.09,
                  "steady": {"rate_per_s": 45_000.0, "lateness_ms": {"p99": 5.0, "max": 20.0}},
                  "targets_met": {"schedule_ratio": True, "dispatch_ratio": False,
                                  "dispatch_per_s": False, "lateness_p99": True,
                                  "lateness_max": True}},
        "queue_game": "error: PostgreSQL is down",
        "web": {"connections": 100,
                "results": [{**web_result, "phase": p, "rps": r} for p, r in
                            (("bare", 10_000.0), ("poll_304", 8_000.0), ("full", 5_000.0),
                             ("commands", 300.0))],
                "ratios": {"poll_304_ratio": 0.8, "full_ratio": 0.5, "commands_ratio": 0.03},
                "targets_met": {"poll_304_ratio": True, "full_ratio": True,
                                "poll_304_p99": True, "full_p99": True}},
    }  # fmt: skip


def test_summary_rows_carry_each_figure_its_ceiling_and_verdict() -> None:
    rows = {row[0]: row for row in summary_rows(_figures())}
    assert rows["tick villages/s (sqlite)"][1:] == ["900,000", "1,000,000", "0.90", "≥ 0.8", "met"]
    assert rows["tick villages/rotation"][-1] == "met"  # 2M ≥ 1M on SQLite
    assert rows["queue schedule/s"][-1] == "met"
    assert rows["queue dispatch/s"][-1] == "MISSED"
    assert rows["lateness ms @45k/s"][1] == "5.0 / 20.0"
    assert rows["web 304 req/s, p99 12ms"][1:4] == ["8,000", "10,000", "0.80"]
    assert rows["web full req/s, p99 12ms"][-1] == "met"
    assert rows["queue_game"][-1] == "ERROR"  # a failed benchmark is listed, not dropped
