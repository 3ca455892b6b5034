"""Prometheus metrics of the web tier, and who may read them.

Requests are counted and timed per *route template* (``/api/reports/{id}``),
never per raw path, so label sets stay bounded; unmatched paths share the
label ``unmatched``. Each app has its own registry (tests build many apps).

Exposure: ``/metrics`` answers a client on the loopback interface that came
without a proxy header (``Forwarded``/``X-Forwarded-For``: a local reverse
proxy would otherwise make the internet look local), or anyone presenting
``Authorization: Bearer <WebConfig.metrics_token>``. Everyone else gets 404,
as if the route did not exist. Scrape it from the host or a sidecar.
With ``--workers N`` each worker has its own registry and a scrape reaches
whichever worker the kernel picks: scrape each worker or use one process.
"""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "webfront_requests",
            "HTTP requests answered, by route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "webfront_request_duration_seconds",
            "time to answer a request, by route template",
            ["method", "route"],
            buckets=_BUCKETS_S,
            registry=self.registry,
        )
        # label lookups cost more than the increments: keep the children
        self._counters: dict[tuple[str, str, int], Counter] = {}
        self._histograms: dict[tuple[str, str], Histogram] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        counter = self._counters.get((method, route, status))
        if counter is None:
            counter = self._counters[method, route, status] = self._requests.labels(
                method, route, str(status)
            )
        counter.inc()
        histogram = self._histograms.get((method, route))
        if histogram is None:
            histogram = self._histograms[method, route] = self._latency.labels(method, route)
        histogram.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def route_label(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return "unmatched" if resource is None else resource.canonical


def may_read_metrics(request: web.Request, token: str | None) -> bool:
    if token:
        auth = request.headers.get("Authorization", "")
        if hmac.compare_digest(auth.encode(), f"Bearer {token}".encode()):
            return True
    if "Forwarded" in request.headers or "X-Forwarded-For" in request.headers:
        return False
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False
