"""Queue throughput and lateness beside a raw multi-member ZADD and a bare Lua batch pop.

One run, in this order, all under a bench-owned Redis prefix:

1. ceiling for scheduling: N events encoded as the queue stores them (member,
   due ms, msgpack body) and pushed whole as sorted-set members with
   multi-member ZADDs (redis-py, one pipeline per 10,000 events, as the
   bench calls ``schedule_many``);
2. ceiling for dispatch: the same events popped by a bare Lua script
   (ZRANGEBYSCORE + ZREM, batches of the worker's size, one call per
   partition per round trip, redis-py);
3. ours: the same number of events through ``EventQueue.schedule_many``, then
   drained by the real ``TaskServer`` (burst mode, one process, one worker per
   partition) with a no-op in-memory handler: claim + handler + ack;
4. lateness: events due spread over time at a steady rate (half the measured
   dispatch rate unless ``--rate``), run by a ``TaskServer``; lateness is the
   handler's start minus the event's due time.

``--handlers game`` instead runs real march arrivals (battle, loot, reports,
return march) of the reference game on a bench database, beside durable
no-op events on the same database (the floor the queue's durable path sets).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import gc
import logging
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from redis.asyncio import Redis

from common.errors import FatalError

_PREFIX_RE = re.compile(r"wgbench[A-Za-z0-9_-]*")
TARGETS = {
    "dispatch_per_s": 100_000,
    "dispatch_ratio": 0.4,
    "schedule_ratio": 0.7,
    "lateness_p99_ms": 20.0,
    "lateness_max_ms": 100.0,
    "game_events_per_s": 3_000,
}
BENCH_KIND = "bench.noop"
REDIS_BYTES_PER_EVENT = 260  # due member + payload blob in Redis, measured ~200-230
PY_BYTES_PER_EVENT = 24  # lateness sample (8) and its share of chunk buffers
DEFAULT_ARQ_PYTHON = Path("var/bench/arq-venv/bin/python")
ARQ_SETUP = "python3 -m venv var/bench/arq-venv && var/bench/arq-venv/bin/pip install arq"
# arq's defaults (10 jobs at once, a poll every 0.5 s) run ~200 jobs/s here; these settings
# gave it the best rate of the few tried (10/0.5 s, 100/0.05 s, 1000/0.01 s)
ARQ_MAX_JOBS = 100
ARQ_POLL_DELAY_S = 0.05
SCHEDULE_CALL = 10_000  # events per schedule_many call (and per raw ZADD "call")


def load_average() -> float:
    """The 1-minute load average (0 where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return 0.0


def warn_if_busy(load_at_start: float) -> None:
    """Say so when other processes kept the CPUs busy before the run started."""
    cores = os.cpu_count() or 1
    if load_at_start > 0.5 * cores:
        from bench.report import console

        console.print(
            f"[yellow]note: the load average was {load_at_start:.1f} on {cores} cores before "
            "this run: other processes share the CPUs, so the figures (even the ratios) are "
            "noisier than on a quiet machine[/yellow]"
        )


def check_bench_prefix(prefix: str) -> str:
    """Refuse a Redis prefix the bench does not own (it deletes every key under it)."""
    if not _PREFIX_RE.fullmatch(prefix):
        raise FatalError(
            f"--prefix {prefix!r}: a bench prefix starts with 'wgbench' and holds only letters, "
            "digits, '_' and '-' (the bench deletes every key under it)"
        )
    return prefix


async def clear_prefix(redis: Redis, prefix: str) -> int:
    """Delete every key under ``prefix:`` (a bench prefix only); return how many."""
    check_bench_prefix(prefix)
    deleted = 0
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=f"{prefix}:*", count=5000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += int(await redis.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(await redis.unlink(*batch))
    return deleted


# ---- memory ------------------------------------------------------------------------------


def _mem_available() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


async def check_memory(redis: Redis, redis_url: str, events: int) -> dict[str, Any]:
    """Refuse a size that would not fit in Redis (maxmemory) or in this machine's memory."""
    info = await redis.info("memory")
    need_redis = events * REDIS_BYTES_PER_EVENT
    need_local = events * PY_BYTES_PER_EVENT
    maxmemory = int(info.get("maxmemory", 0))
    used = int(info.get("used_memory", 0))
    gib = 2**30
    if maxmemory and used + need_redis > maxmemory * 0.9:
        raise FatalError(
            f"{events:,} events need about {need_redis / gib:.1f} GiB in Redis, but its "
            f"maxmemory is {maxmemory / gib:.1f} GiB with {used / gib:.1f} GiB used: "
            "use a smaller --events"
        )
    local = redis_url.startswith("unix://") or any(
        h in redis_url for h in ("127.0.0.1", "localhost", "[::1]")
    )
    available = _mem_available()
    need_here = need_local + (need_redis if local else 0)
    if available is not None and need_here > available * 0.8:
        raise FatalError(
            f"{events:,} events need about {need_here / gib:.1f} GiB of memory on this machine "
            f"(Redis and the bench), but only {available / gib:.1f} GiB are available: "
            "use a smaller --events"
        )
    return {"redis_used_bytes": used, "redis_maxmemory": maxmemory, "mem_available": available}


# ---- the ceilings: the same event bytes through redis-py, with no queue logic -------------

_POP = """
local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #m > 0 then redis.call('ZREM', KEYS[1], unpack(m)) end
return m
"""
_pack = msgpack.Packer().pack


def raw_key(prefix: str, partition: int) -> str:
    return f"{prefix}:raw:{{r{partition}}}"


def _due(start_ms: int, i: int, rate: float | None) -> int:
    return start_ms if rate is None else start_ms + int(i * 1000 / rate)


def event_blob(i: int, due_ms: int) -> bytes:
    """An event as the queue stores it: member (priority, id), due ms, msgpack body."""
    body = _pack([i + 1, BENCH_KIND, i + 1, due_ms, 0, {"order_id": i + 1}, 0, False])
    return b"%04x%016x%013d" % (32768, i + 1, due_ms) + body


async def raw_zadd(
    redis: Redis, prefix: str, partitions: int, events: int, start_ms: int, progress: Any
) -> float:
    """Encode ``events`` events and ZADD them (the whole blob as member), as many members per
    command as fall in a partition, one pipeline per ``SCHEDULE_CALL`` events; return seconds.
    """
    keys = [raw_key(prefix, p) for p in range(partitions)]
    started = time.perf_counter()
    for call_start in range(0, events, SCHEDULE_CALL):
        call_stop = min(events, call_start + SCHEDULE_CALL)
        groups: dict[int, dict[bytes, int]] = {}
        for i in range(call_start, call_stop):
            group = groups.get(i % partitions)
            if group is None:
                group = groups[i % partitions] = {}
            group[event_blob(i, start_ms)] = start_ms
        async with redis.pipeline(transaction=False) as pipe:
            for p, members in groups.items():
                pipe.zadd(keys[p], members)
            await pipe.execute()
        progress.update(call_stop - call_start)
    return time.perf_counter() - started


async def bare_pop(
    redis: Redis, prefix: str, partitions: int, batch: int, progress: Any
) -> tuple[int, float]:
    """Pop every raw event in batches of ``batch`` with a bare Lua script (ZRANGEBYSCORE +
    ZREM), one call per non-empty partition per round trip; return (events, seconds)."""
    sha = await redis.script_load(_POP)
    keys = [raw_key(prefix, p) for p in range(partitions)]
    left = list(range(partitions))
    popped = 0
    now = int(time.time() * 1000) + 10_000
    started = time.perf_counter()
    while left:
        async with redis.pipeline(transaction=False) as pipe:
            for p in left:
                pipe.evalsha(sha, 1, keys[p], now, batch)
            replies = await pipe.execute()
        still = []
        for p, members in zip(left, replies, strict=True):
            popped += len(members)
            progress.update(len(members))
            if len(members) == batch:
                still.append(p)
        left = still
    return popped, time.perf_counter() - started


# ---- ours ----------------------------------------------------------------------------------


@dataclass
class Recorder:
    """What the bench handler saw: lateness per event, first start and last end."""

    expected: int
    lateness_ms: array.array[float] = field(default_factory=lambda: array.array("d"))
    due_ms: array.array[int] = field(default_factory=lambda: array.array("q"))  # same order
    keep_due: bool = False  # record due times too (the steady run plots lateness over time)
    handled: int = 0
    ready_at: float | None = None  # when the task server's workers started
    first_start: float = math.inf
    last_end: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    progress: Any = None
    failed_calls: int = 0  # handler calls that raised or were cancelled (e.g. timed out)
    failed_events: int = 0  # their events: the worker re-runs them one by one
    slowest_call_s: float = 0.0

    def window_s(self) -> float:
        """From the workers' start (or the first handler call) to the last handler's end."""
        start = self.ready_at if self.ready_at is not None else self.first_start
        return max(self.last_end - start, 1e-9)

    def wrap(self, handler: Callable[[Any, list[Any]], Awaitable[None]] | None) -> Any:
        async def handle(ctx: Any, events: list[Any]) -> None:
            started = time.perf_counter()
            now_ms = time.time() * 1000
            if started < self.first_start:
                self.first_start = started
            self.lateness_ms.extend([now_ms - e.due_ms for e in events])
            if self.keep_due:
                self.due_ms.extend([e.due_ms for e in events])
            if handler is not None:
                try:
                    await handler(ctx, events)
                except BaseException:
                    self.failed_calls += 1
                    self.failed_events += len(events)
                    raise
                finally:
                    self.slowest_call_s = max(self.slowest_call_s, time.perf_counter() - started)
            self.handled += len(events)
            self.last_end = time.perf_counter()
            if self.progress is not None:
                self.progress.update(len(events))
            if self.handled >= self.expected:
                self.done.set()

        return handle


async def schedule_ours(
    queue: Any, events: int, start_ms: int, rate: float | None, progress: Any
) -> float:
    from common.queue import NewEvent

    started = time.perf_counter()
    for call_start in range(0, events, SCHEDULE_CALL):
        call_stop = min(events, call_start + SCHEDULE_CALL)
        chunk = [
            NewEvent(BENCH_KIND, i + 1, _due(start_ms, i, rate), {"order_id": i + 1})
            for i in range(call_start, call_stop)
        ]
        await queue.schedule_many(chunk)
        progress.update(call_stop - call_start)
    return time.perf_counter() - started


def _quiet_logs() -> None:
    for name in ("gameserver", "apscheduler", "webfront", "db", "refgame"):
        logging.getLogger(name).setLevel(logging.WARNING)


async def run_task_server(
    settings: Any,
    registry: Any,
    recorder: Recorder,
    *,
    burst: bool,
    batch: int,
    timeout_s: float,
    ready: asyncio.Event | None = None,
    partial_ok: bool = False,
    on_done: Callable[[], object] | None = None,
) -> float:
    """Run a TaskServer until the recorder saw every event; return the wall seconds.

    After ``timeout_s`` (or a burst run that ends early) it stops; that is an
    error unless ``partial_ok`` (the steady run reports how far it got).
    """
    from gameserver.config import TaskServerConfig
    from gameserver.taskserver import TaskServer

    server = TaskServer(settings, registry, config=TaskServerConfig(batch_size=batch), burst=burst)
    # as the gameserver console script does: what lives on stays out of full GC passes
    # (collect first, so the bench's scheduling garbage is not frozen with it)
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    task = asyncio.create_task(server.run())
    try:
        waiter = asyncio.create_task(server.started.wait())
        await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if server.started.is_set():
            recorder.ready_at = time.perf_counter()
        if task.done():
            task.result()  # a failed start: raise its error
        if ready is not None:
            ready.set()
        waiter = asyncio.create_task(recorder.done.wait())
        finished, _ = await asyncio.wait(
            [waiter, task], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        if task in finished:
            task.result()
        if on_done is not None:
            on_done()
        if recorder.handled < recorder.expected and not partial_ok:
            raise FatalError(
                f"the task server ran {recorder.handled:,} of {recorder.expected:,} events "
                f"in {time.perf_counter() - started:.0f} s"
            )
        return time.perf_counter() - started
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await task


def bench_registry(recorder: Recorder) -> Any:
    from common.queue.handlers import HandlerRegistry
    from gameserver import builtin

    registry = HandlerRegistry()
    builtin.register(registry)
    registry.register(BENCH_KIND, recorder.wrap(None), durable=False)
    return registry


# ---- the no-op run -------------------------------------------------------------------------


@dataclass
class Rates:
    events: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.events / max(self.seconds, 1e-9)


def _lateness(values: Sequence[float]) -> dict[str, float]:
    from bench.report import percentiles

    return percentiles(values)


async def noop_bench(
    *,
    events: int,
    partitions: int,
    batch: int,
    rate: float | None,
    steady_seconds: float,
    redis_url: str,
    prefix: str,
    db_name: str,
    out: Path,
    vs_arq: bool = False,
    arq_python: Path = DEFAULT_ARQ_PYTHON,
    arq_events: int = 10_000,
) -> dict[str, Any]:
    from tqdm import tqdm

    from bench import report
    from bench.databases import drop_database, fresh_database
    from common.clock import SYSTEM_CLOCK
    from common.queue import EventQueue
    from common.redis_conn import check_redis

    _quiet_logs()
    check_bench_prefix(prefix)
    load_at_start = load_average()
    redis = Redis.from_url(redis_url)
    database = None
    try:
        await check_redis(redis, redis_url)
        memory = await check_memory(redis, redis_url, events)
        await clear_prefix(redis, prefix)
        database = await fresh_database(
            "sqlite", db_name, redis_url, redis_prefix=prefix, queue_partitions=partitions,
            gameserver_metrics_port=0, log_level="WARNING",
        )  # fmt: skip
        settings = database.settings
        start_ms = int(time.time() * 1000)

        with tqdm(total=events, desc="raw ZADD (ceiling)", unit="ev", unit_scale=True) as bar:
            zadd_s = await raw_zadd(redis, prefix, partitions, events, start_ms, bar)
        with tqdm(total=events, desc="bare Lua pop (ceiling)", unit="ev", unit_scale=True) as bar:
            popped, pop_s = await bare_pop(redis, prefix, partitions, batch, bar)
        if popped != events:
            raise FatalError(f"the bare pop found {popped:,} members, not {events:,}")

        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)
        before = int((await redis.info("memory"))["used_memory"])
        with tqdm(total=events, desc="schedule_many", unit="ev", unit_scale=True) as bar:
            schedule_s = await schedule_ours(queue, events, start_ms, None, bar)
        redis_bytes = (int((await redis.info("memory"))["used_memory"]) - before) / events
        await queue.aclose()

        recorder = Recorder(events)
        with tqdm(total=events, desc="task server drain", unit="ev", unit_scale=True) as bar:
            recorder.progress = bar
            drain_wall = await run_task_server(
                settings, bench_registry(recorder), recorder, burst=True, batch=batch,
                timeout_s=max(120.0, events / 5_000),
            )  # fmt: skip
        dispatch = Rates(events, recorder.window_s())
        backlog = _lateness(recorder.lateness_ms)

        arq = None
        if vs_arq:
            report.console.print(f"arq: {arq_events:,} deferred no-op jobs ({arq_python}) ...")
            arq = await arq_peer(arq_python, redis_url, prefix, arq_events)

        steady_rate = rate if rate is not None else dispatch.per_s / 2
        steady = None
        if steady_seconds > 0:
            steady = await steady_load(
                settings, redis, prefix, partitions, batch, steady_rate, steady_seconds,
                Rates(events, schedule_s).per_s,
            )  # fmt: skip
    finally:
        with contextlib.suppress(Exception):
            await clear_prefix(redis, prefix)
            if vs_arq:
                await clear_arq_keys(redis, prefix)
        await redis.aclose()
        if database is not None:
            await drop_database(database)

    zadd, pop, sched = Rates(events, zadd_s), Rates(popped, pop_s), Rates(events, schedule_s)
    summary: dict[str, Any] = {
        "mode": "noop",
        "events": events,
        "partitions": partitions,
        "batch": batch,
        "schedule_per_s": sched.per_s,
        "raw_zadd_per_s": zadd.per_s,
        "schedule_ratio": sched.per_s / zadd.per_s,
        "dispatch_per_s": dispatch.per_s,
        "bare_pop_per_s": pop.per_s,
        "dispatch_ratio": dispatch.per_s / pop.per_s,
        "drain_wall_s": drain_wall,
        "backlog_age_ms": backlog,
        "redis_bytes_per_event": redis_bytes,
        "memory": memory,
        "targets": TARGETS,
    }
    if steady is not None:
        summary["steady"] = steady.summary()
    if arq is not None:
        summary["arq"] = arq
        summary["dispatch_vs_arq"] = dispatch.per_s / max(arq["run_per_s"], 1e-9)
    met = {
        "dispatch_per_s": dispatch.per_s >= TARGETS["dispatch_per_s"],
        "dispatch_ratio": summary["dispatch_ratio"] >= TARGETS["dispatch_ratio"],
        "schedule_ratio": summary["schedule_ratio"] >= TARGETS["schedule_ratio"],
    }
    if steady is not None:
        lat = steady.lateness()
        met["lateness_p99"] = lat["p99"] <= TARGETS["lateness_p99_ms"]
        met["lateness_max"] = lat["max"] <= TARGETS["lateness_max_ms"]
    summary["targets_met"] = met
    _print_noop(summary, steady)
    if steady is not None:
        summary["plot"] = str(
            report.save_plot(out, "queue_lateness", lambda ax: steady.draw(ax, dispatch.per_s))
        )
        summary["plot_over_time"] = str(
            report.save_plot(out, "queue_lateness_time", steady.draw_over_time)
        )
    warn_if_busy(load_at_start)
    extra = {
        "redis": await _redis_version(redis_url),
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": load_average(),
    }
    summary["json"] = str(
        report.save_json(out, "queue_noop", {"machine": report.machine_info(extra), **summary})
    )
    return summary


@dataclass
class Steady:
    rate: float
    seconds: float
    events: int
    recorder: Recorder
    late_start_ms: float  # how long after the first due time the scheduling ended (0: before)

    def lateness(self) -> dict[str, float]:
        return _lateness(self.recorder.lateness_ms)

    def backlog_ms(self) -> tuple[float, float]:
        """Median lateness of the first and of the last tenth of the events by due time.

        A server that keeps up has about the same at both ends; one that does
        not piles up a backlog, and the lateness grows through the run.
        """
        import numpy as np

        due = np.frombuffer(self.recorder.due_ms, dtype=np.int64)
        late = np.frombuffer(self.recorder.lateness_ms, dtype=np.float64)
        if len(due) < 20 or len(due) != len(late):
            return 0.0, 0.0
        ordered = late[np.argsort(due, kind="stable")]
        tenth = len(ordered) // 10
        return float(np.median(ordered[:tenth])), float(np.median(ordered[-tenth:]))

    def summary(self) -> dict[str, Any]:
        first, last = self.backlog_ms()
        return {
            "lateness_p50_first_tenth_ms": first,
            "lateness_p50_last_tenth_ms": last,
            "kept_up": last - first < 50,
            "rate_per_s": self.rate,
            "seconds": self.seconds,
            "events": self.events,
            "handled": self.recorder.handled,
            "fell_behind": self.recorder.handled < self.events,
            "achieved_per_s": self.recorder.handled / self.recorder.window_s(),
            "lateness_ms": self.lateness(),
            "scheduling_overran_first_due_ms": self.late_start_ms,
        }

    def draw(self, ax: Any, capacity: float) -> None:
        values = list(self.recorder.lateness_ms)
        lat = self.lateness()
        top = max(1.0, lat["max"])
        ax.hist(values, bins=100, range=(min(0.0, min(values, default=0.0)), top), log=True)
        for name, style in (("p50", ":"), ("p99", "--"), ("max", "-")):
            ax.axvline(lat[name], color="black", linestyle=style, linewidth=0.8,
                       label=f"{name} {lat[name]:.1f} ms")  # fmt: skip
        ax.set_xlabel("lateness: handler start - due time (ms)")
        ax.set_ylabel("events")
        ax.set_title(
            f"lateness at {self.rate:,.0f} events/s for {self.seconds:.0f} s "
            f"({self.rate / max(capacity, 1e-9):.0%} of the measured dispatch rate)"
        )
        ax.legend()

    def draw_over_time(self, ax: Any) -> None:
        """Lateness against due time: a steady backlog and a neighbour's burst look different."""
        due, late = self.recorder.due_ms, self.recorder.lateness_ms
        if not due:
            return
        first = min(due)
        step = max(1, len(due) // 100_000)  # enough points to see, few enough to draw
        xs = [(due[i] - first) / 1000 for i in range(0, len(due), step)]
        ys = [late[i] for i in range(0, len(late), step)]
        ax.scatter(xs, ys, s=1, alpha=0.3, linewidths=0)
        ax.set_xlabel("due time (s from the first event)")
        ax.set_ylabel("lateness (ms)")
        ax.set_title(f"lateness over time at {self.rate:,.0f} events/s")


async def steady_load(
    settings: Any,
    redis: Redis,
    prefix: str,
    partitions: int,
    batch: int,
    rate: float,
    seconds: float,
    schedule_rate: float,
) -> Steady:
    """Events due at ``rate``/s over ``seconds``, run by a TaskServer.

    The server starts first and idles; then every event is scheduled, due from
    ``first_due`` on, which leaves twice the expected scheduling time: so the
    server only runs events once the producer is done (it does not share the
    event loop with the bench's scheduling while it is measured).
    """
    from tqdm import tqdm

    from bench.report import console
    from common.clock import SYSTEM_CLOCK
    from common.queue import EventQueue

    events = max(1, int(rate * seconds))
    await check_memory(redis, "redis://127.0.0.1", events)  # counted as local: conservative
    recorder = Recorder(events, keep_due=True)
    ready = asyncio.Event()
    lead_s = events / max(schedule_rate, 1.0) * 2 + 2.0
    run = run_task_server(
        settings, bench_registry(recorder), recorder, burst=False, batch=batch,
        timeout_s=60 + lead_s + seconds + max(30.0, 3 * seconds), ready=ready, partial_ok=True,
    )  # fmt: skip
    server = asyncio.create_task(run)
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait([waiter, server], return_when=asyncio.FIRST_COMPLETED)
    if server.done():
        server.result()  # it failed to start: raise its error
    first_due = int(time.time() * 1000 + lead_s * 1000)
    queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)
    with tqdm(total=events, desc=f"schedule steady load ({rate:,.0f}/s)", unit="ev",
              unit_scale=True) as bar:  # fmt: skip
        await schedule_ours(queue, events, first_due, rate, bar)
    await queue.aclose()
    recorder.ready_at = None  # its rate counts from the first handler call, not the idle start
    late_start = max(0.0, time.time() * 1000 - first_due)  # scheduling overran the lead
    with tqdm(total=events, desc="steady load", unit="ev", unit_scale=True) as bar:
        bar.update(recorder.handled)
        recorder.progress = bar
        await server
    if recorder.handled < events:
        console.print(
            f"[yellow]the task server fell behind: it ran {recorder.handled:,} of {events:,} "
            "events before the bench stopped it; lateness covers those[/yellow]"
        )
    steady = Steady(rate, seconds, events, recorder, late_start)
    first, last = steady.backlog_ms()
    if last - first >= 50:
        console.print(
            f"[yellow]the task server did not keep up with {rate:,.0f} events/s: the median "
            f"lateness grew from {first:.0f} ms (first tenth of the events) to {last:.0f} ms "
            "(last tenth); see queue_lateness_time.png[/yellow]"
        )
    if late_start > 0:
        console.print(
            f"[yellow]scheduling the steady load ended {late_start:.0f} ms after its first due "
            "time (a busy machine?): the first events' lateness includes that[/yellow]"
        )
    return Steady(rate, seconds, events, recorder, late_start)


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _print_noop(summary: dict[str, Any], steady: Steady | None) -> None:
    from bench import report

    met = summary["targets_met"]
    rows = [
        ["schedule_many", f"{summary['schedule_per_s']:,.0f}", "raw ZADD",
         f"{summary['raw_zadd_per_s']:,.0f}", f"{summary['schedule_ratio']:.2f}",
         f"≥ {TARGETS['schedule_ratio']}", _verdict(met["schedule_ratio"])],
        ["dispatch", f"{summary['dispatch_per_s']:,.0f}", "bare Lua pop",
         f"{summary['bare_pop_per_s']:,.0f}", f"{summary['dispatch_ratio']:.2f}",
         f"≥ {TARGETS['dispatch_ratio']}", _verdict(met["dispatch_ratio"])],
        ["dispatch", f"{summary['dispatch_per_s']:,.0f}", "absolute", "", "",
         f"≥ {TARGETS['dispatch_per_s'] // 1000}k/s", _verdict(met["dispatch_per_s"])],
    ]  # fmt: skip
    report.print_table(
        f"queue: {summary['events']:,} events, {summary['partitions']} partitions, "
        f"batches of {summary['batch']}; events/s (dispatch = claim + no-op handler + ack)",
        rows,
        ["ours", "events/s", "ceiling", "events/s", "ratio", "target", ""],
    )
    if steady is not None:
        lat = steady.lateness()
        report.print_table(
            f"lateness at {steady.rate:,.0f} events/s for {steady.seconds:.0f} s "
            f"({steady.rate / max(summary['dispatch_per_s'], 1e-9):.0%} of the dispatch rate), ms",
            [[f"{steady.events:,}", *(f"{lat[k]:.1f}" for k in ("p50", "p90", "p99", "max"))]],
            ["events", "p50", "p90", "p99", "max"],
        )
        report.console.print(
            f"lateness p99 {lat['p99']:.1f} ms (target ≤ {TARGETS['lateness_p99_ms']:.0f}: "
            f"{_verdict(met['lateness_p99'])}), max {lat['max']:.1f} ms (target ≤ "
            f"{TARGETS['lateness_max_ms']:.0f}: {_verdict(met['lateness_max'])})"
        )
    arq = summary.get("arq")
    if arq:
        lat = arq["lateness_ms"]
        report.print_table(
            f"peer: arq {arq['version']}, {arq['events']:,} deferred no-op jobs, one worker "
            f"(max_jobs={ARQ_MAX_JOBS}, poll_delay={ARQ_POLL_DELAY_S} s); events/s",
            [
                [
                    "arq",
                    f"{arq['enqueue_per_s']:,.0f}",
                    f"{arq['run_per_s']:,.0f}",
                    f"{lat['p50']:.0f}",
                    f"{lat['p99']:.0f}",
                    f"{summary['dispatch_vs_arq']:,.0f}×",
                ]
            ],
            ["", "enqueue", "run", "late p50 ms", "late p99 ms", "our dispatch"],
        )
    report.console.print(
        f"Redis memory: {summary['redis_bytes_per_event']:.0f} bytes per pending event",
        highlight=False,
    )


async def _redis_version(redis_url: str) -> str | None:
    client = Redis.from_url(redis_url, socket_timeout=3)
    try:
        return str((await client.info("server")).get("redis_version"))
    except Exception:
        return None
    finally:
        await client.aclose()


# ---- the game run: real march arrivals on a bench database --------------------------------

GAME_BYTES_PER_VILLAGE = 3_000  # player, village, stock, 13 buildings, troops, with indexes
GAME_BYTES_PER_EVENT = 4_000  # march, event row, processed row, two reports, the return


def _radius_for(villages: int) -> int:
    """A map with about twice as many spots as villages (the generator needs free spots)."""
    return max(5, math.ceil((math.sqrt(2 * villages) - 1) / 2) + 1)


def timed_registry(settings: Any, recorder: Recorder, measured: str) -> Any:
    """The task server's real registry (builtin + the game's), ``measured`` wrapped to time it."""
    from common.queue.handlers import HandlerRegistry
    from gameserver.main import game_registry

    real = game_registry(settings)
    registry = HandlerRegistry()
    for kind in real.kinds():
        reg = real.get(kind)
        assert reg is not None
        handler = recorder.wrap(reg.handler) if kind == measured else reg.handler
        registry.register(
            kind, handler, durable=reg.durable, timeout_s=reg.timeout_s, retry=reg.retry,
            max_batch=reg.max_batch,
        )  # fmt: skip
    return registry


async def add_events(engine: Any, queue: Any, events: Sequence[Any]) -> None:
    """Durable events in transactions of 10,000, indexed in Redis after each commit."""
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue.durable import add_durable_events

    for start in range(0, len(events), SCHEDULE_CALL):
        async with AsyncSession(engine) as session, session.begin():
            written = await add_durable_events(
                session, events[start : start + SCHEDULE_CALL], ids=queue.ids
            )
        await queue.index(written)


async def make_marches(
    engine: Any, queue: Any, first: int, villages: int, events: int, due_ms: int | None = None
) -> None:
    """``events`` attacks due at ``due_ms`` (default now): village i sends its army, split in
    equal marches, to others.

    Each village keeps what does not divide evenly at home, so every target has a
    few defenders: battles with losses on both sides, loot, reports, a return march.
    Marches and their events are written as a command would (database march ids,
    one durable event each), in transactions of 10,000.
    """
    from sqlalchemy import case, insert, literal, update
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue import NewEvent
    from common.queue.durable import add_durable_events
    from db.models import March, Troop
    from refgame.handlers import MARCH
    from refgame.world import STARTING_TROOPS

    per_village = math.ceil(events / villages)
    share = {u: n // per_village for u, n in STARTING_TROOPS.items() if n // per_village > 0}
    if not share:
        raise FatalError(
            f"{events:,} marches from {villages:,} villages is {per_village} per village, more "
            f"than a village's army can be split in; use more --villages"
        )
    now = int(time.time() * 1000) if due_ms is None else due_ms
    extra = events % villages  # villages below first + extra send one more march
    async with engine.begin() as conn:
        sends = (
            literal(per_village)
            if extra == 0
            else case((Troop.village_id < first + extra, per_village), else_=per_village - 1)
        )
        for unit, n in share.items():
            await conn.execute(
                update(Troop)
                .where(Troop.unit == unit, Troop.village_id == Troop.home_village_id)
                .values(count=Troop.count - sends * n)
            )
    for start in range(0, events, SCHEDULE_CALL):
        rows, targets = [], []
        for i in range(start, min(events, start + SCHEDULE_CALL)):
            origin = first + i % villages
            hop = 1 + (i // villages) * 7 % (villages - 1)  # a different target per march
            target = first + (origin - first + hop) % villages
            targets.append(target)
            rows.append(
                {"kind": "attack", "origin_village_id": origin, "target_village_id": target,
                 "troops": dict(share), "loot": {}, "depart_ms": now - 60_000,
                 "arrive_ms": now, "event_id": 0}
            )  # fmt: skip
        event_ids = queue.ids.next_ids(len(rows))
        for row, event_id in zip(rows, event_ids, strict=True):
            row["event_id"] = event_id
        async with AsyncSession(engine) as session, session.begin():
            found = await session.execute(
                insert(March).returning(March.id, sort_by_parameter_order=True), rows
            )
            march_ids = list(found.scalars())
            news = [
                NewEvent(MARCH, target, now, {"march_id": march_id}, id=event_id)
                for target, march_id, event_id in zip(targets, march_ids, event_ids, strict=True)
            ]
            written = await add_durable_events(session, news, ids=queue.ids)
        await queue.index(written)


def cpu_by_pid(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds each live process of ``pids`` and its reaped children have used so far
    (user + system; a PostgreSQL backend that exits is added to the postmaster's)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited
        out[pid] = sum(int(f) for f in fields[11:15]) / tick
    return out


def backend_pids(database: str) -> list[int]:
    """The local PostgreSQL backends serving ``database`` (none if it runs elsewhere)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                title = (proc / "cmdline").read_bytes().decode(errors="replace").split()
                if title[:1] == ["postgres:"] and database in title:
                    pids.append(int(proc.name))
    return pids


class CpuMeter:
    """CPU used by the task server(s) and by the bench database's PostgreSQL backends during
    a phase: a rate measured on a shared machine says little; CPU per event says what it
    costs. Read ``per_event_us`` while the task servers still hold their connections."""

    def __init__(self, task_pids: Sequence[int], database: str) -> None:
        self.task_pids, self.database = list(task_pids), database
        self.before = cpu_by_pid(self.task_pids), cpu_by_pid(backend_pids(database))

    def per_event_us(self, events: int) -> dict[str, float]:
        out = {}
        for name, before, pids in (
            ("task_server", self.before[0], self.task_pids),
            ("postgres", self.before[1], backend_pids(self.database)),
        ):
            after = cpu_by_pid(pids)
            used = sum(t - before.get(pid, 0.0) for pid, t in after.items())
            out[name] = used / max(events, 1) * 1e6
        return out


def database_name(settings: Any) -> str:
    from sqlalchemy.engine import make_url

    return str(make_url(settings.database_url).database)


class TaskProcesses:
    """``n`` real task-server processes (``gameserver --no-tick``) sharing the partitions by
    their leases, as a deployment runs them; events are counted in ``processed_events``."""

    def __init__(self, settings: Any, n: int, batch: int) -> None:
        self.settings, self.n, self.batch = settings, n, batch
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        import sys

        s = self.settings
        env = {
            **os.environ, "DATABASE_URL": s.database_url, "REDIS_URL": s.redis_url,
            "REDIS_PREFIX": s.redis_prefix, "QUEUE_PARTITIONS": str(s.queue_partitions),
            "TICK_SHARDS": str(s.tick_shards), "GAME": s.game, "WORLD_SPEED": str(s.world_speed),
            "GAMESERVER_METRICS_PORT": "0", "LOG_LEVEL": "WARNING",
        }  # fmt: skip
        for _ in range(self.n):
            args = ["-m", "gameserver", "--no-tick", "--batch-size", str(self.batch)]
            self.procs.append(await asyncio.create_subprocess_exec(sys.executable, *args, env=env))

    async def drain(
        self, engine: Any, kind: str, expected: int, due_ms: int, timeout_s: float
    ) -> float:
        """Seconds from ``due_ms`` (when every event became due) until ``expected`` events of
        ``kind`` are processed (polled every 50 ms, so at most 50 ms pessimistic)."""
        from sqlalchemy import text

        deadline = time.time() + timeout_s
        done = 0
        async with engine.connect() as conn:
            while time.time() < deadline:
                if any(p.returncode is not None for p in self.procs):
                    raise FatalError("a task-server process exited during the bench")
                done = int(
                    (await conn.execute(
                        text("SELECT count(*) FROM processed_events WHERE kind = :k"), {"k": kind}
                    )).scalar() or 0
                )  # fmt: skip
                await conn.rollback()
                if done >= expected:
                    return max(time.time() - due_ms / 1000, 1e-9)
                await asyncio.sleep(0.05)
        raise FatalError(f"the task servers ran {done:,} of {expected:,} {kind} events in time")

    async def stop(self) -> None:
        for p in self.procs:
            if p.returncode is None:
                p.terminate()
        for p in self.procs:
            try:
                await asyncio.wait_for(p.wait(), 15)
            except TimeoutError:
                p.kill()
                await p.wait()


def due_after_writing(events: int) -> int:
    """A due time for ``events`` bench events that falls after they are all written (about
    10,000/s here) and after task servers started now have shared out the partitions."""
    return int((time.time() + 6 + events / 5_000) * 1000)


async def _wait_until(due_ms: int, written: str) -> None:
    late = time.time() * 1000 - due_ms
    if late > 0:
        raise FatalError(f"writing the {written} took longer than planned ({late:.0f} ms past "
                         "their due time); the window would be wrong")  # fmt: skip
    await asyncio.sleep(-late / 1000)


async def _counts(engine: Any) -> dict[str, int]:
    from sqlalchemy import text

    out = {}
    async with engine.connect() as conn:
        for name, sql in (
            ("processed_marches", "SELECT count(*) FROM processed_events WHERE kind = 'march'"),
            ("reports", "SELECT count(*) FROM reports"),
            ("return_marches", "SELECT count(*) FROM marches WHERE kind = 'return'"),
            ("pending_events", "SELECT count(*) FROM scheduled_events"),
        ):
            out[name] = int((await conn.execute(text(sql))).scalar() or 0)
    return out


async def _game_in_process(
    settings: Any, engine: Any, queue: Any, first: int, villages: int, events: int, batch: int
) -> tuple[float, float, float, Recorder, dict[str, float]]:
    """Both phases on a task server in this process: (floor/s, game/s, game wall s, recorder,
    CPU µs per march arrival)."""
    from tqdm import tqdm

    from bench import report
    from common.queue import NewEvent
    from gameserver.builtin import NOOP_DURABLE
    from refgame.handlers import MARCH

    # the floor: durable no-op events through the same worker path and database
    now = int(time.time() * 1000)
    noop_events = [NewEvent(NOOP_DURABLE, first + i % villages, now) for i in range(events)]
    await add_events(engine, queue, noop_events)
    floor = Recorder(events)
    with tqdm(total=events, desc="durable no-op events", unit="ev", unit_scale=True) as bar:
        floor.progress = bar
        await run_task_server(
            settings, timed_registry(settings, floor, NOOP_DURABLE), floor, burst=True,
            batch=batch, timeout_s=max(300.0, events / 100),
        )  # fmt: skip

    report.console.print(f"sending {events:,} attacks, due now ...")
    await make_marches(engine, queue, first, villages, events)
    await queue.aclose()
    game = Recorder(events)
    cpu = CpuMeter([os.getpid()], database_name(settings))
    cpu_us: dict[str, float] = {}

    def measure_cpu() -> None:  # before the task server closes its connections
        cpu_us.update(cpu.per_event_us(events))

    with tqdm(total=events, desc="march arrivals", unit="ev", unit_scale=True) as bar:
        game.progress = bar
        game_wall = await run_task_server(
            settings, timed_registry(settings, game, MARCH), game, burst=True, batch=batch,
            timeout_s=max(600.0, events / 20), on_done=measure_cpu,
        )  # fmt: skip
    floor_rate = Rates(events, floor.window_s()).per_s
    game_rate = Rates(events, game.window_s()).per_s
    return floor_rate, game_rate, game_wall, game, cpu_us


async def _game_in_processes(
    settings: Any, engine: Any, queue: Any, first: int, villages: int, events: int,
    processes: int, batch: int,
) -> tuple[float, float, dict[str, float]]:  # fmt: skip
    """Both phases on ``processes`` real task servers: (floor seconds, game seconds), each
    from the moment all its events became due until the last was processed."""
    from bench import report
    from common.queue import NewEvent
    from gameserver.builtin import NOOP_DURABLE
    from refgame.handlers import MARCH

    servers = TaskProcesses(settings, processes, batch)
    await servers.start()
    try:
        due = due_after_writing(events)
        noop_events = [NewEvent(NOOP_DURABLE, first + i % villages, due) for i in range(events)]
        await add_events(engine, queue, noop_events)
        await _wait_until(due, "durable no-op events")
        report.console.print(f"{processes} task servers run {events:,} durable no-op events ...")
        floor_s = await servers.drain(engine, NOOP_DURABLE, events, due, max(300.0, events / 100))
        due = due_after_writing(events)
        report.console.print(f"sending {events:,} attacks ...")
        await make_marches(engine, queue, first, villages, events, due_ms=due)
        await queue.aclose()
        await _wait_until(due, "attacks")
        report.console.print(f"{processes} task servers run {events:,} march arrivals ...")
        cpu = CpuMeter([p.pid for p in servers.procs], database_name(settings))
        game_s = await servers.drain(engine, MARCH, events, due, max(600.0, events / 20))
        cpu_us = cpu.per_event_us(events)
    finally:
        await servers.stop()
    return floor_s, game_s, cpu_us


async def game_bench(
    *,
    events: int,
    villages: int,
    partitions: int,
    batch: int,
    db: str,
    db_name: str,
    pg_admin_url: str,
    redis_url: str,
    prefix: str,
    out: Path,
    processes: int = 1,
) -> dict[str, Any]:
    from bench import report
    from bench.databases import check_disk, drop_database, fresh_database
    from common.clock import SYSTEM_CLOCK
    from common.queue import EventQueue
    from common.redis_conn import check_redis
    from db.worldgen import generate_world
    from refgame.world import village_template

    _quiet_logs()
    check_bench_prefix(prefix)
    load_at_start = load_average()
    data_dir = Path("/var/lib/postgresql" if db == "postgresql" else "var")
    need = villages * GAME_BYTES_PER_VILLAGE + 2 * events * GAME_BYTES_PER_EVENT
    check_disk(data_dir, need, f"a game queue bench of {villages:,} villages, {events:,} events")
    redis = Redis.from_url(redis_url)
    database = None
    try:
        await check_redis(redis, redis_url)
        await check_memory(redis, redis_url, events)
        await clear_prefix(redis, prefix)
        database = await fresh_database(
            db, db_name, redis_url, pg_admin_url, redis_prefix=prefix,
            queue_partitions=partitions, gameserver_metrics_port=0, log_level="WARNING",
        )  # fmt: skip
        settings, engine = database.settings, database.engine
        report.console.print(f"generating a world of {villages:,} villages on {db} ...")
        world = await generate_world(
            engine, players=villages, template=village_template(settings.world_speed),
            shards=settings.tick_shards, map_radius=_radius_for(villages), seed=1,
        )  # fmt: skip
        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)

        if processes > 1:
            floor_s, game_s, cpu_us = await _game_in_processes(
                settings, engine, queue, world.first_village_id, villages, events, processes,
                batch,
            )  # fmt: skip
            game_rate, floor_rate = events / game_s, events / floor_s
            game_wall: float = game_s
            game = None
        else:
            floor_rate, game_rate, game_wall, game, cpu_us = await _game_in_process(
                settings, engine, queue, world.first_village_id, villages, events, batch
            )
        counts = await _counts(engine)
        versions = await _db_version(engine)
    finally:
        with contextlib.suppress(Exception):
            await clear_prefix(redis, prefix)
        await redis.aclose()
        if database is not None:
            await drop_database(database, pg_admin_url)

    summary: dict[str, Any] = {
        "mode": "game",
        "db": db,
        "villages": villages,
        "events": events,
        "partitions": partitions,
        "batch": batch,
        "processes": processes,
        "game_events_per_s": game_rate,
        "durable_noop_per_s": floor_rate,
        "ratio_to_durable_noop": game_rate / max(floor_rate, 1e-9),
        "cpu_us_per_event": cpu_us,
        # what the CPU per event allows when the machine's cores do nothing else
        "cpu_bound_events_per_s": (os.cpu_count() or 1) * 1e6 / max(sum(cpu_us.values()), 1e-9),
        "game_drain_wall_s": game_wall,
        "counts": counts,
        "failed_handler_calls": game.failed_calls if game else None,
        "failed_handler_events": game.failed_events if game else None,
        "slowest_handler_call_s": game.slowest_call_s if game else None,
        "targets": {"game_events_per_s": TARGETS["game_events_per_s"]},
        "targets_met": {"game_events_per_s": game_rate >= TARGETS["game_events_per_s"]},
    }
    met = summary["targets_met"]["game_events_per_s"]
    report.print_table(
        f"queue --handlers game: {events:,} march arrivals, {villages:,} villages on {db}, "
        f"{partitions} partitions, {processes} task-server process(es); events/s",
        [
            [
                "march arrivals (battle, loot, reports, return)",
                f"{game_rate:,.0f}",
                f"≥ {TARGETS['game_events_per_s']:,}",
                _verdict(met),
            ],
            ["durable no-op (the queue's durable floor)", f"{floor_rate:,.0f}", "", ""],
        ],
        ["events", "events/s", "target", ""],
    )
    report.console.print(
        f"march arrivals are {summary['ratio_to_durable_noop']:.2f}× the durable no-op rate; "
        f"processed {counts['processed_marches']:,} marches, {counts['reports']:,} reports, "
        f"{counts['return_marches']:,} return marches scheduled",
        highlight=False,
    )
    report.console.print(
        f"CPU per march arrival: {cpu_us['task_server']:.0f} µs in the task server(s), "
        f"{cpu_us['postgres']:.0f} µs in PostgreSQL: at most "
        f"{summary['cpu_bound_events_per_s']:,.0f}/s on {os.cpu_count()} otherwise idle cores",
        highlight=False,
    )
    if game is not None and game.failed_calls:
        from common.queue.constants import HANDLER_TIMEOUT_S

        report.console.print(
            f"[yellow]{game.failed_calls} handler calls ({game.failed_events:,} events) failed or "
            f"were cancelled; the slowest took {game.slowest_call_s:.1f} s (handler timeout "
            f"{HANDLER_TIMEOUT_S:.0f} s): their work was rolled back and the worker re-ran "
            "those events one by one[/yellow]"
        )
    warn_if_busy(load_at_start)
    extra = {
        "redis": await _redis_version(redis_url),
        "database": versions,
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": load_average(),
    }
    name = f"queue_game_{db}"
    summary["json"] = str(
        report.save_json(out, name, {"machine": report.machine_info(extra), **summary})
    )
    return summary


async def _db_version(engine: Any) -> str:
    from sqlalchemy import text

    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            return str((await conn.execute(text("SHOW server_version"))).scalar())
        return "sqlite " + str((await conn.execute(text("SELECT sqlite_version()"))).scalar())


# ---- a peer: arq, in its own virtualenv (it pins redis-py < 6, which this project outgrew) --

_ARQ_DRIVER = r"""
import asyncio, datetime, json, logging, sys, time
from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker, func

logging.disable(logging.INFO)
url, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
queue = prefix + ":arq"
lateness, span = [], [float("inf"), 0.0]

async def noop(ctx, due_ms):
    now = time.perf_counter()
    span[0] = min(span[0], now)
    lateness.append(time.time() * 1000 - due_ms)
    span[1] = time.perf_counter()

async def main():
    pool = await create_pool(RedisSettings.from_dsn(url), default_queue_name=queue)
    due_ms = int((time.time() + n / 2000 + 1.0) * 1000)  # after the last enqueue, we hope
    when = datetime.datetime.fromtimestamp(due_ms / 1000, tz=datetime.timezone.utc)
    started = time.perf_counter()
    for i in range(n):
        await pool.enqueue_job("noop", due_ms, _job_id=f"{prefix}:{i}", _defer_until=when)
    enqueue_s = time.perf_counter() - started
    worker = Worker([func(noop, name="noop", keep_result=0)], redis_pool=pool, queue_name=queue,
                    burst=True, handle_signals=False, keep_result=0, log_results=False,
                    max_jobs=int(sys.argv[4]), poll_delay=float(sys.argv[5]))
    await worker.main()
    await worker.close()
    late = sorted(lateness)
    pick = lambda q: late[min(len(late) - 1, max(0, int(q * len(late) + 0.5) - 1))]
    print("ARQJSON " + json.dumps({
        "events": n, "ran": len(late), "enqueue_s": enqueue_s, "run_s": span[1] - span[0],
        "lateness_ms": {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": late[-1]},
    }), flush=True)

asyncio.run(main())
"""


async def arq_peer(python: Path, redis_url: str, prefix: str, events: int) -> dict[str, Any]:
    """Enqueue ``events`` deferred no-op jobs with arq, run them with an arq worker (burst)."""
    import json
    import subprocess
    import tempfile

    if not python.exists():
        raise FatalError(f"--vs arq: no interpreter at {python}; set one up with: {ARQ_SETUP}")
    check = await asyncio.create_subprocess_exec(
        str(python), "-c", "import arq", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if await check.wait() != 0:
        raise FatalError(f"--vs arq: {python} cannot import arq; install it: {ARQ_SETUP}")
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="wgbench-arq-") as script:
        script.write(_ARQ_DRIVER)
        script.flush()
        proc = await asyncio.create_subprocess_exec(
            str(python), script.name, redis_url, f"{prefix}:arq", str(events),
            str(ARQ_MAX_JOBS), str(ARQ_POLL_DELAY_S), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
    for line in out.decode().splitlines():
        if line.startswith("ARQJSON "):
            figures: dict[str, Any] = json.loads(line[len("ARQJSON ") :])
            break
    else:
        raise FatalError(f"--vs arq: the arq run failed: {err.decode().strip()[-500:]}")
    version = await asyncio.create_subprocess_exec(
        str(python), "-c", "import arq; print(arq.VERSION)", stdout=subprocess.PIPE
    )
    figures["version"] = (await version.communicate())[0].decode().strip()
    figures["settings"] = {"max_jobs": ARQ_MAX_JOBS, "poll_delay_s": ARQ_POLL_DELAY_S}
    figures["enqueue_per_s"] = events / max(figures["enqueue_s"], 1e-9)
    figures["run_per_s"] = figures["ran"] / max(figures["run_s"], 1e-9)
    return figures


async def clear_arq_keys(redis: Redis, prefix: str) -> None:
    """arq names its job keys ``arq:<kind>:<job id>``; ours carry the bench prefix."""
    check_bench_prefix(prefix)
    async for key in redis.scan_iter(match=f"arq:*:{prefix}:arq:*", count=5000):
        await redis.unlink(key)
