"""Prometheus metrics of a task server, on their own registry (several servers per test process)."""

from __future__ import annotations

import contextlib
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from gameserver.group_histogram import GroupHistogram

_TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# 1 s is a bound: "p99 lateness under 1 s" is read exactly from its cumulative count
_LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class QueueMetrics:
    """Queue counters per partition, depth and lag gauges, handler latency per kind."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        part = ["partition"]
        self.claimed = Counter("gameserver_queue_claimed", "Events claimed", part, registry=r)
        self.acked = Counter(
            "gameserver_queue_acked", "Events acked after running", part, registry=r
        )
        self.retried = Counter(
            "gameserver_queue_retried", "Failed events put back", part, registry=r
        )
        self.dead = Counter(
            "gameserver_queue_dead", "Events sent to dead letters", part, registry=r
        )
        self.redelivered = Counter(
            "gameserver_queue_redelivered",
            "Durable events delivered again after they ran: acked without effect",
            part,
            registry=r,
        )
        self.held_back = Counter(
            "gameserver_queue_held_back",
            "Events put back because an earlier event had to run first (village order, "
            "lookahead barrier)",
            part,
            registry=r,
        )
        self.hold_seconds = Gauge(
            "gameserver_queue_hold_seconds",
            "How long the partition has been holding events back (0: it is not)",
            part,
            registry=r,
        )
        self.long_holds = Counter(
            "gameserver_queue_long_holds",
            "Warnings about events held back for longer than a few seconds",
            ["reason"],
            registry=r,
        )
        self.depth = Gauge(
            "gameserver_queue_depth", "Events waiting (any due time)", part, registry=r
        )
        self.ready = Gauge(
            "gameserver_queue_ready", "Events due now and not claimed", part, registry=r
        )
        self.inflight = Gauge(
            "gameserver_queue_inflight", "Events claimed, not acked", part, registry=r
        )
        self.dead_depth = Gauge("gameserver_queue_dead_depth", "Dead events kept", part, registry=r)
        self.lag = Gauge(
            "gameserver_queue_lag_seconds", "Now minus the oldest due time", part, registry=r
        )
        self.held = Gauge(
            "gameserver_partitions_held", "Queue partitions this process owns", registry=r
        )
        self.unowned = Gauge(
            "gameserver_partitions_unowned",
            "Queue partitions no live task server holds (their events wait)",
            registry=r,
        )
        self.latency = Histogram(
            "gameserver_handler_seconds",
            "Time of one handler call (a batch of events)",
            ["kind"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.lateness = GroupHistogram(
            "gameserver_event_lateness_seconds",
            "How late an event's handler started: the time it ran (a durable event's: its "
            "transaction, which committed) minus its due time",
            _LATENESS_BUCKETS,
            r,
        )
        self.transactions = Counter(
            "gameserver_event_transactions",
            "Transactions that ran durable events (one call of their handler; groups of "
            "several partitions gathered into one count once)",
            ["kind"],
            registry=r,
        )
        self.transaction_events = Counter(
            "gameserver_event_transaction_events",
            "Events those transactions carried",
            ["kind"],
            registry=r,
        )
        self.handler_failures = Counter(
            "gameserver_handler_failures",
            "Handler calls that raised or timed out (their events are then isolated)",
            ["kind", "reason"],
            registry=r,
        )
        self.reconciled = Counter(
            "gameserver_reconciled", "Pending DB events re-indexed in Redis", registry=r
        )
        self.crashes = Counter(
            "gameserver_task_crashes",
            "Background loops (leases, wake-ups, reconciler, tick leases) that crashed and "
            "were restarted",
            ["task"],
            registry=r,
        )
        self.redis_data_lost = Counter(
            "gameserver_redis_data_lost", "Partitions whose Redis marker vanished", registry=r
        )

    def forget_partition(self, partition: int) -> None:
        """Stop exporting the gauges of a partition this process no longer holds: its new
        owner exports them, and two processes' stale values would disagree."""
        label = str(partition)
        for gauge in (
            self.depth,
            self.ready,
            self.inflight,
            self.dead_depth,
            self.lag,
            self.hold_seconds,
        ):
            with contextlib.suppress(KeyError):  # never exported by this process
                gauge.remove(label)

    def serve(self, port: int, addr: str = "127.0.0.1") -> MetricsServer:
        """Serve /metrics on ``addr:port`` (loopback unless told: no authentication)."""
        server, thread = start_http_server(port, addr, registry=self.registry)
        return MetricsServer(server, thread)


class TickMetrics:
    """The sharded tick's metrics, on the task server's registry (or one of their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.seconds = Histogram(
            "tick_shard_seconds",
            "Duration of one shard's tick transaction",
            buckets=_TICK_BUCKETS,
            registry=r,
        )
        self.villages = Counter(
            "tick_villages", "Village rows materialized by the tick", registry=r
        )
        self.overruns = Counter(
            "tick_overruns", "Ticks skipped because the previous one still ran", registry=r
        )
        self.failures = Counter("tick_failures", "Shard ticks that raised", registry=r)
        self.lag = Gauge(
            "tick_lag_seconds", "Delay between a tick's second and its start", registry=r
        )
        self.horizon_lag = Gauge(
            "tick_horizon_lag_seconds",
            "How far behind now the last tick settled stocks (an earlier event was pending)",
            registry=r,
        )


class MetricsServer:
    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
