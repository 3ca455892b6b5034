"""Smoke tests of ``python -m bench queue`` at tiny sizes: figures produced and sane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from bench.queue import DEFAULT_ARQ_PYTHON, check_memory
from common.errors import FatalError
from tests.conftest import TEST_PG_ADMIN_URL, TEST_REDIS_URL


def _keys_left(prefix: str) -> list[bytes]:
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        return list(client.scan_iter(match=f"{prefix}:*", count=1000))
    finally:
        client.close()


def test_queue_bench_produces_sane_figures(tmp_path: Path) -> None:
    prefix = f"wgbench_smoke_{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--events", "3000", "--partitions", "4",
         "--batch", "200", "--rate", "2000", "--steady-seconds", "1", "--warmup-seconds", "0.5",
         "--prefix", prefix,
         "--db-name", prefix, "--redis-url", TEST_REDIS_URL, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / "queue_noop.json").read_text())
    assert figures["events"] == 3000 and figures["partitions"] == 4 and figures["batch"] == 200
    assert figures["machine"]["cpu_count"] >= 1 and figures["machine"]["redis"]
    for key in ("schedule_per_s", "raw_zadd_per_s", "dispatch_per_s", "bare_pop_per_s"):
        assert figures[key] > 0, key
    assert figures["schedule_ratio"] > 0 and figures["dispatch_ratio"] > 0
    assert figures["redis_bytes_per_event"] > 20
    steady = figures["steady"]
    # the warm-up's 1,000 events ran too, measured apart
    assert steady["events"] == steady["handled"] == 2000 and steady["warmup_s"] == 0.5
    warm = steady["warmup_lateness_ms"]
    assert warm["p50"] <= warm["p99"] <= warm["max"] and warm["p50"] > -5
    lat = steady["lateness_ms"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["p50"] > -5  # no event runs (much) before it is due; clocks are ms-grained
    assert isinstance(steady["kept_up"], bool)
    assert steady["lateness_p50_first_tenth_ms"] <= lat["max"]
    assert set(figures["targets_met"]) >= {"dispatch_ratio", "schedule_ratio", "lateness_p99"}
    assert (tmp_path / "queue_lateness.png").stat().st_size > 1000
    assert (tmp_path / "queue_lateness_time.png").stat().st_size > 1000
    assert "raw ZADD" in proc.stdout and "lateness p99" in proc.stdout
    assert _keys_left(prefix) == []  # the bench cleaned its prefix


@pytest.mark.parametrize(("db", "processes"), [("sqlite", 1), ("postgresql", 1), ("postgresql", 2)])
def test_queue_bench_game_handlers_run_real_marches(
    db: str, processes: int, tmp_path: Path
) -> None:
    prefix = f"wgbench_smoke_{uuid.uuid4().hex[:8]}"
    # enough arrivals that PostgreSQL's CPU time is several clock ticks (10 ms each) on a
    # fast host, 150 arrivals could round to zero
    arrivals = 1_200
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--handlers", "game", "--events", str(arrivals),
         "--villages", "400", "--partitions", "4", "--db", db, "--db-name", prefix,
         "--prefix", prefix, "--pg-admin-url", TEST_PG_ADMIN_URL, "--redis-url",
         TEST_REDIS_URL, "--out", str(tmp_path), "--processes", str(processes)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / f"queue_game_{db}.json").read_text())
    counts = figures["counts"]
    assert figures["game"] == "refgame" and figures["kind"] == "march"
    assert counts["processed_events"] == arrivals  # every arrival ran once
    assert counts["reports"] == 2 * arrivals  # a battle report for each side
    assert 0 < counts["return_marches"] <= arrivals  # survivors walk home with their loot
    assert figures["game_events_per_s"] > 0 and figures["durable_noop_per_s"] > 0
    assert figures["processes"] == processes
    cpu = figures["cpu_us_per_event"]
    assert cpu["task_server"] > 0 and (cpu["postgres"] > 0) == (db == "postgresql")
    assert figures["machine"]["database"]
    assert _keys_left(prefix) == []


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_queue_bench_game_handlers_run_the_space_game(db: str, tmp_path: Path) -> None:
    prefix = f"wgbench_smoke_{uuid.uuid4().hex[:8]}"
    arrivals = 600
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--handlers", "game", "--events", str(arrivals),
         "--villages", "200", "--partitions", "4", "--db", db, "--db-name", prefix,
         "--prefix", prefix, "--pg-admin-url", TEST_PG_ADMIN_URL, "--redis-url",
         TEST_REDIS_URL, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "GAME": "examples.spacegame"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / f"queue_game_{db}.json").read_text())
    assert figures["game"] == "spacegame" and figures["kind"] == "sg.fleet_arrive"
    counts = figures["counts"]
    assert counts["processed_events"] == arrivals  # every fleet arrived once
    assert counts["reports"] == 2 * arrivals  # a battle report for each side
    assert 0 < counts["return_flights"] <= arrivals  # survivors fly home
    assert counts["pending_events"] == counts["return_flights"]  # their flights home
    assert figures["game_events_per_s"] > 0 and figures["durable_noop_per_s"] > 0
    assert "sg.fleet_arrive events" in proc.stdout
    assert _keys_left(prefix) == []


def test_queue_bench_game_handlers_refuse_a_game_without_a_workload(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--handlers", "game", "--events", "100",
         "--prefix", "wgbench_smoke_nobench", "--redis-url", TEST_REDIS_URL,
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "GAME": "examples.harvest"},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "declares no bench workload" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_queue_bench_refuses_a_prefix_it_does_not_own(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--prefix", "wg", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "starts with 'wgbench'" in proc.stderr


class _FakeRedis:
    def __init__(self, info: dict[str, Any]) -> None:
        self._info = info

    async def info(self, _section: str) -> dict[str, Any]:
        return self._info


async def test_a_size_that_does_not_fit_in_redis_is_refused_clearly() -> None:
    fake = _FakeRedis({"maxmemory": 100 * 2**20, "used_memory": 10 * 2**20})
    with pytest.raises(FatalError, match="use a smaller --events"):
        await check_memory(fake, "redis://10.0.0.9:6379/0", 1_000_000)  # type: ignore[arg-type]
    figures = await check_memory(fake, "redis://10.0.0.9:6379/0", 1_000)  # type: ignore[arg-type]
    assert figures["redis_maxmemory"] == 100 * 2**20


def test_queue_bench_vs_arq_without_arq_says_how_to_set_it_up(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--events", "1000", "--steady-seconds", "0",
         "--vs", "arq", "--arq-python", str(tmp_path / "no-python"), "--prefix",
         f"wgbench_smoke_{uuid.uuid4().hex[:8]}", "--redis-url", TEST_REDIS_URL,
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--vs arq: no interpreter at" in proc.stderr and "pip install arq" in proc.stderr


def _arq_venv() -> None:
    """The peer's own venv (arq pins its own redis-py): made once, as ARQ_SETUP says."""
    if DEFAULT_ARQ_PYTHON.exists():
        return
    venv = DEFAULT_ARQ_PYTHON.parent.parent
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(DEFAULT_ARQ_PYTHON), "-m", "pip", "install", "-q", "arq==0.28.0"],
        check=True,
        timeout=600,
    )


def test_queue_bench_vs_arq_measures_the_peer(tmp_path: Path) -> None:
    _arq_venv()
    prefix = f"wgbench_smoke_{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "queue", "--events", "1000", "--steady-seconds", "0",
         "--vs", "arq", "--arq-events", "300", "--prefix", prefix, "--db-name", prefix,
         "--redis-url", TEST_REDIS_URL, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    arq = json.loads((tmp_path / "queue_noop.json").read_text())["arq"]
    assert arq["events"] == arq["ran"] == 300
    assert arq["run_per_s"] > 0 and arq["enqueue_per_s"] > 0 and arq["version"]
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        assert list(client.scan_iter(match=f"arq:*{prefix}*", count=1000)) == []
    finally:
        client.close()
    assert _keys_left(prefix) == []
