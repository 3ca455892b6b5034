"""Prometheus metrics of the web tier, and who may read them.

Requests are counted and timed per *route template* (``/api/reports/{id}``),
never per raw path, so label sets stay bounded; unmatched paths share the
label ``unmatched``. Each app has its own registry (tests build many apps).

Exposure: ``/metrics`` answers a local client (``webfront.proxies``: on the
loopback interface, and without any forwarding header unless it came through
a trusted proxy: a local reverse proxy would otherwise make the internet look
local), or anyone presenting ``Authorization: Bearer <token>``
(``WEB_METRICS_TOKEN`` or ``WebConfig.metrics_token``). Everyone else gets 404,
as if the route did not exist. Scrape it from the host or a sidecar.
With ``--workers N`` each worker has its own registry and a scrape reaches
whichever worker the kernel picks: scrape each worker or use one process.
"""

from __future__ import annotations

import hmac
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from db.shared_writes import SharedWrites
from webfront.proxies import ClientResolver

_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_LE = [*(floatToGoString(b) for b in _BUCKETS_S), "+Inf"]


class StreamCounts(Protocol):
    """What the metrics read of the event streams' hub (``webfront.push.PushHub``)."""

    count: int  # streams open
    dropped: int  # streams dropped for falling behind, since start


class Metrics:
    """Plain counters on the request path (a dict increment and a bisect: no locks, no label
    lookups), turned into Prometheus families only when ``/metrics`` is scraped."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests: dict[tuple[str, str, int], int] = {}
        # (method, route) -> [count per bucket (the last one is +Inf), sum of seconds]
        self._latency: dict[tuple[str, str], list[Any]] = {}
        # snapshot bodies built (full answers neither body cache could serve): against the
        # full answers, what the caches save
        self.snapshot_builds = 0
        # snapshot statements run (each reads a batch of players: against the builds, how
        # well the reads gather, webfront.snapshot_reads)
        self.snapshot_statements = 0
        # where commands' closing statements are written together (db.shared_writes; None
        # on SQLite): its closings against its statements, how well the writes gather
        self.shared_writes: SharedWrites | None = None
        # the event streams (webfront.push), once its hub runs
        self.push: StreamCounts | None = None
        self.registry.register(self)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        self._requests[key] = self._requests.get(key, 0) + 1
        latency = self._latency.get((method, route))
        if latency is None:
            latency = self._latency[method, route] = [[0] * len(_LE), 0.0]
        latency[0][bisect_left(_BUCKETS_S, seconds)] += 1
        latency[1] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "webfront_requests",
            "HTTP requests answered, by route template and status",
            labels=["method", "route", "status"],
        )
        for (method, route, status), count in self._requests.items():
            requests.add_metric([method, route, str(status)], count)
        yield requests
        latency = HistogramMetricFamily(
            "webfront_request_duration_seconds",
            "time to answer a request, by route template",
            labels=["method", "route"],
        )
        for (method, route), (counts, total) in self._latency.items():
            cumulative = accumulate(counts)
            latency.add_metric(
                [method, route], list(zip(_LE, cumulative, strict=True)), sum_value=total
            )
        yield latency
        yield CounterMetricFamily(
            "webfront_snapshot_builds",
            "snapshot bodies built from the database (full answers no body cache served)",
            value=self.snapshot_builds,
        )
        yield CounterMetricFamily(
            "webfront_snapshot_statements",
            "snapshot statements run (each reads every player whose build waited for it)",
            value=self.snapshot_statements,
        )
        writes = self.shared_writes
        yield CounterMetricFamily(
            "webfront_command_closings",
            "commands' closing statements handed to the shared writers (db.shared_writes)",
            value=writes.closings if writes else 0,
        )
        yield CounterMetricFamily(
            "webfront_command_closing_statements",
            "statements that wrote them (a batch's one, or one per closing written alone)",
            value=writes.statements_run if writes else 0,
        )
        push = self.push
        yield GaugeMetricFamily(
            "webfront_push_streams", "event streams open (GET /api/events)",
            value=push.count if push else 0,
        )  # fmt: skip
        yield CounterMetricFamily(
            "webfront_push_dropped",
            "event streams dropped for falling behind (unsent bytes over the buffer)",
            value=push.dropped if push else 0,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


def may_read_metrics(request: web.Request, token: str | None, clients: ClientResolver) -> bool:
    if token:
        auth = request.headers.get("Authorization", "")
        if hmac.compare_digest(auth.encode(), f"Bearer {token}".encode()):
            return True
    return clients.client(request).local
