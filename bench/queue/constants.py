"""The queue bench's targets, sizes and the arq peer's settings, in one place."""

from __future__ import annotations

from pathlib import Path

TARGETS = {
    "dispatch_per_s": 100_000,
    "dispatch_ratio": 0.4,
    "schedule_ratio": 0.7,
    "lateness_p99_ms": 20.0,
    "lateness_max_ms": 100.0,
    "game_events_per_s": 3_000,
}
BENCH_KIND = "bench.noop"
REDIS_BYTES_PER_EVENT = 260  # due member + payload blob in Redis, with headroom
PY_BYTES_PER_EVENT = 24  # lateness sample (8) and its share of chunk buffers
DEFAULT_ARQ_PYTHON = Path("var/bench/arq-venv/bin/python")
ARQ_SETUP = "python3 -m venv var/bench/arq-venv && var/bench/arq-venv/bin/pip install arq"
# arq's defaults (10 jobs at once, a poll every 0.5 s) hold it far below its best; these settings
# gave it the best rate of the few tried (10/0.5 s, 100/0.05 s, 1000/0.01 s)
ARQ_MAX_JOBS = 100
ARQ_POLL_DELAY_S = 0.05
SCHEDULE_CALL = 10_000  # events per schedule_many call (and per raw ZADD "call")
