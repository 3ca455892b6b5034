"""Smoke test of ``python -m bench push`` at a tiny size: a real web process, real streams,
every change received; its README row renders from the JSON it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.readme import load_published, render
from tests.bench.test_readme_bench import table_rows
from tests.conftest import TEST_REDIS_URL


def test_push_bench_delivers_every_change_and_renders_its_row(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "push", "--channels", "40", "--rate", "40",
         "--duration", "1", "--burst", "20", "--bursts", "2", "--redis-url", TEST_REDIS_URL,
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / "push.json").read_text())
    assert figures["benchmark"] == "push" and figures["channels"] == 40
    steady, bursts = figures["steady"], figures["bursts"]
    assert steady["changes"] > 0 and steady["count"] == steady["changes"]
    assert steady["lost"] == 0 and bursts["lost"] == 0 and bursts["count"] == 40
    assert 0 < steady["p50_ms"] <= steady["p99_ms"] <= steady["max_ms"]
    assert figures["streams_closed_by_server"] == 0
    assert figures["web_rss_mb"]["streams_open"] > 0
    assert figures["machine"]["loadavg_at_start"] is not None

    published = tmp_path / "published"
    published.mkdir()
    (published / "push.json").write_text((tmp_path / "push.json").read_text())
    rows = table_rows(render(load_published(published), published))
    row = rows["push: 40 open event streams on one web process, a version bump to the client"]
    assert row[0].startswith("p50 ") and "bursts of 20" in row[0]
    assert row[3:] == ["p99 < 1 s, none lost", "met"]
