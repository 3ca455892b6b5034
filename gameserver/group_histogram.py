"""A Prometheus histogram fed a group of values at a time (a claimed batch's events)."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class GroupHistogram(Collector):
    """A histogram of millisecond values observed a group at a time: one ``observe`` per
    event would cost about as much as dispatching a no-op event."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation = name, documentation
        self._les = [floatToGoString(b) for b in (*buckets, math.inf)]
        self._bounds_ms = [b * 1000 for b in buckets]
        self._counts = [0] * (len(buckets) + 1)  # per bucket, not cumulative; last: +Inf
        self._sum_ms = 0
        registry.register(self)

    def observe_ms(self, values: Sequence[int]) -> None:
        ordered = sorted(values)
        start = 0
        for i, bound in enumerate(self._bounds_ms):
            if start == len(ordered):
                break  # the rest of the buckets get none
            end = bisect_right(ordered, bound, start)
            self._counts[i] += end - start
            start = end
        self._counts[-1] += len(ordered) - start
        self._sum_ms += sum(ordered)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        counts, total, cumulative = list(self._counts), 0, []
        for le, n in zip(self._les, counts, strict=True):
            total += n  # the count is the buckets' own total: consistent mid-update too
            cumulative.append((le, float(total)))
        yield HistogramMetricFamily(
            self.name, self.documentation, buckets=cumulative, sum_value=self._sum_ms / 1000
        )
