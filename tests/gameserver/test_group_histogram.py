"""``GroupHistogram`` exports what a prometheus_client ``Histogram`` fed the same values one
at a time exports (but the ``_created`` sample, and a sum without float rounding)."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from gameserver.group_histogram import GroupHistogram

BUCKETS = (0.005, 0.01, 0.25, 1.0, 2.5)


def _samples(registry: CollectorRegistry) -> dict[str, float]:
    text = generate_latest(registry).decode()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {n: float(v) for n, v in (line.rsplit(" ", 1) for line in lines) if "_created" not in n}


def test_groups_export_what_single_observations_export() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    grouped = GroupHistogram("late_seconds", "how late", BUCKETS, ours)
    single = Histogram("late_seconds", "how late", buckets=BUCKETS, registry=theirs)
    rng = random.Random(3)
    for size in (1, 7, 1000, 0, 3):
        values = [rng.choice((0, 5, 6, 250, 1000, 1001, 2500, 9000)) for _ in range(size)]
        grouped.observe_ms(values)
        for v in values:
            single.observe(v / 1000)
    mine, reference = _samples(ours), _samples(theirs)
    assert mine.pop("late_seconds_sum") == pytest.approx(reference.pop("late_seconds_sum"))
    assert mine == reference
    assert mine['late_seconds_bucket{le="1.0"}'] < mine["late_seconds_count"]
