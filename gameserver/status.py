"""A task server's status record in Redis, for the operator console.

Every ``STATUS_EVERY_S`` each task server writes one JSON record into the world's hash
``<prefix>:status`` (field: the process), read from its own metrics registry: events
acked per second since the last record, dead letters, partitions held, the tick's
shard durations and overruns, and any clock offset gauge the process exports. The web
tier shows the records younger than ``STALE_AFTER_MS``; the hash expires when no
task server has written for ``KEY_TTL_MS``, and a stopping server removes its field.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from common.clock import Clock
from common.redis_conn import AnyRedis

if TYPE_CHECKING:
    from gameserver.taskserver import TaskServer

log = logging.getLogger(__name__)

STATUS_EVERY_S = 2.0
STALE_AFTER_MS = 15_000  # a record this old is a process that stopped or hangs
KEY_TTL_MS = 300_000
PRUNE_EVERY = 30  # records written between two passes that delete stale fields


def status_key(prefix: str) -> str:
    return f"{prefix}:status"


def _sums(registry: CollectorRegistry) -> dict[str, float]:
    """Every sample of the registry, summed over its labels."""
    out: dict[str, float] = defaultdict(float)
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name.endswith("_bucket"):
                out[f"{sample.name}:{sample.labels.get('le')}"] += sample.value
            else:
                out[sample.name] += sample.value
    return out


def _p99_bound(now: dict[str, float], before: dict[str, float]) -> float | None:
    """The upper bound (seconds) of the tick-duration bucket holding the p99 since before."""
    prefix = "tick_shard_seconds_bucket:"
    buckets = sorted(
        (float(k[len(prefix) :]), v - before.get(k, 0.0))
        for k, v in now.items()
        if k.startswith(prefix)
    )
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    for bound, count in buckets:
        if count >= 0.99 * total:
            return bound
    return None


class StatusPublisher:
    """Writes this process's status record every ``every_s`` while it runs."""

    def __init__(
        self,
        registry: CollectorRegistry,
        redis: AnyRedis,
        prefix: str,
        clock: Clock,
        name: str | None = None,
        every_s: float = STATUS_EVERY_S,
    ) -> None:
        self.registry = registry
        self.redis = redis
        self.key = status_key(prefix)
        self.clock = clock
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.every_s = every_s
        self.started_ms = clock.now_ms()
        self._before: dict[str, float] = {}
        self._before_ms: int | None = None
        self._written = 0
        self._stop = asyncio.Event()
        # the last interval's tick figures, kept through intervals in which this process ran
        # no shard (it holds a few of them, one runs per second)
        self._tick_avg_ms: float | None = None
        self._tick_p99_ms: float | None = None

    @classmethod
    def attach(cls, server: TaskServer, every_s: float = STATUS_EVERY_S) -> None:
        """Publish a task server's status while it runs."""
        running: dict[str, Any] = {}

        async def start(server: TaskServer) -> None:
            assert server.redis is not None
            publisher = cls(
                server.metrics.registry,
                server.redis,
                server.settings.redis_prefix,
                server.clock,
                every_s=every_s,
            )
            running["publisher"] = publisher
            running["task"] = server.supervised_task("status-record", publisher.run)

        async def stop(_: TaskServer) -> None:
            publisher = running.get("publisher")
            if publisher is None:
                return
            publisher.stop()
            with contextlib.suppress(Exception):
                await running["task"]
            with contextlib.suppress(Exception):
                await publisher.remove()

        server.on_startup(start)
        server.on_shutdown(stop)

    def record(self) -> dict[str, Any]:
        """The record as of now (and the baseline of the next one's rates)."""
        now_ms = self.clock.now_ms()
        now = _sums(self.registry)
        before = self._before
        seconds = (now_ms - self._before_ms) / 1000 if self._before_ms is not None else 0.0

        def delta(name: str) -> float:
            return now.get(name, 0.0) - before.get(name, 0.0)

        ticks = delta("tick_shard_seconds_count")
        if ticks:
            self._tick_avg_ms = round(1000 * delta("tick_shard_seconds_sum") / ticks, 2)
            p99 = _p99_bound(now, before)
            self._tick_p99_ms = None if p99 is None else round(1000 * p99, 1)
        record = {
            "name": self.name,
            "started_ms": self.started_ms,
            "updated_ms": now_ms,
            "interval_s": round(seconds, 3),
            "events_per_s": round(delta("gameserver_queue_acked_total") / seconds, 1)
            if seconds > 0
            else None,
            "acked_total": int(now.get("gameserver_queue_acked_total", 0)),
            "dead_total": int(now.get("gameserver_queue_dead_total", 0)),
            "partitions_held": int(now.get("gameserver_partitions_held", 0)),
            "tick": {
                "shards_run": int(now.get("tick_shard_seconds_count", 0)),
                "avg_ms": self._tick_avg_ms,
                "p99_ms_at_most": self._tick_p99_ms,
                "overruns_total": int(now.get("tick_overruns_total", 0)),
                "failures_total": int(now.get("tick_failures_total", 0)),
            },
            # offsets from Redis TIME, when the process measures them (name ends in _seconds)
            "clock_offsets_ms": {
                name: round(value * 1000, 1)
                for name, value in now.items()
                if "clock_offset" in name and ":" not in name
            },
        }
        self._before, self._before_ms = now, now_ms
        return record

    async def publish(self) -> dict[str, Any]:
        record = self.record()
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(self.key, self.name, json.dumps(record))
            pipe.pexpire(self.key, KEY_TTL_MS)
            await pipe.execute()
        self._written += 1
        if self._written % PRUNE_EVERY == 0:
            await self._prune(record["updated_ms"])
        return record

    async def _prune(self, now_ms: int) -> None:
        stale = [
            field
            for field, value in (await self.redis.hgetall(self.key)).items()  # type: ignore[misc]
            if _updated(value) < now_ms - KEY_TTL_MS
        ]
        if stale:
            await self.redis.hdel(self.key, *stale)  # type: ignore[misc]

    async def remove(self) -> None:
        await self.redis.hdel(self.key, self.name)  # type: ignore[misc]

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.publish()
            except Exception as exc:  # Redis away: the next record says it all again
                log.warning("writing the status record failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.every_s):
                    await self._stop.wait()


def _updated(value: bytes | str) -> int:
    try:
        return int(json.loads(value)["updated_ms"])
    except (ValueError, KeyError, TypeError):
        return 0


async def read_status(redis: AnyRedis, prefix: str, now_ms: int) -> list[dict[str, Any]]:
    """The task servers' records younger than ``STALE_AFTER_MS``, by name."""
    raw = await redis.hgetall(status_key(prefix))  # type: ignore[misc]
    out = []
    for value in raw.values():
        try:
            record = json.loads(value)
        except ValueError:
            continue
        if isinstance(record, dict) and _updated(value) >= now_ms - STALE_AFTER_MS:
            out.append(record)
    return sorted(out, key=lambda r: str(r.get("name")))
