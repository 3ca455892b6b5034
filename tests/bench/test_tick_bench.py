"""Smoke test of ``python -m bench tick`` at a tiny size: figures produced and sane."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import TEST_PG_ADMIN_URL, TEST_REDIS_URL


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_tick_bench_produces_sane_figures(db: str, tmp_path: Path) -> None:
    name = f"wgbench_smoke_{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "tick", "--villages", "600", "--shards", "6",
         "--rotations", "2", "--db", db, "--db-name", name, "--out", str(tmp_path),
         "--pg-admin-url", TEST_PG_ADMIN_URL, "--redis-url", TEST_REDIS_URL],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / f"tick_{db}.json").read_text())
    assert figures["villages"] == 600 and figures["shards"] == 6
    assert figures["machine"]["cpu_count"] >= 1
    assert 0 < figures["shard_seconds"]["p50"] <= figures["shard_seconds"]["max"]
    assert figures["villages_per_s"] > 0 and figures["ratio_to_bare"] > 0
    assert figures["ratio_to_rule"] > 0 and len(figures["rule_shard_seconds"]) == 4
    assert (tmp_path / f"tick_{db}.png").stat().st_size > 1000
    assert "ratio to bare UPDATE" in proc.stdout and "our statement as raw SQL" in proc.stdout


def test_tick_bench_refuses_a_database_it_does_not_own(pg_url: str) -> None:
    existing = pg_url.rsplit("/", 1)[1]  # the test run's own database: not a bench database
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "tick", "--villages", "600", "--db", "postgresql",
         "--db-name", existing, "--pg-admin-url", TEST_PG_ADMIN_URL],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "is not a bench database" in proc.stderr
