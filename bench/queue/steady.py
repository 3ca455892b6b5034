"""Lateness under a steady load: events due at a fixed rate, run by an idle task server."""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from bench.queue.memory import check_memory
from bench.queue.runner import (
    Recorder,
    bench_registry,
    lateness_percentiles,
    run_task_server,
    schedule_ours,
)


@dataclass
class Steady:
    rate: float
    seconds: float
    events: int
    recorder: Recorder
    late_start_ms: float  # how long after the first due time the scheduling ended (0: before)
    cpu_s: float = 0.0  # process CPU (all threads) from the end of scheduling to the server's stop

    def lateness(self) -> dict[str, float]:
        return lateness_percentiles(self.recorder.lateness_ms)

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
        from gameserver.config import TaskServerConfig

        first, last = self.backlog_ms()
        return {
            # the task server runs with the default config: claims take events due this
            # many ms ahead, which sets how full a steady claim is
            "claim_ahead_ms": TaskServerConfig().claim_ahead_ms,
            "lateness_p50_first_tenth_ms": first,
            "lateness_p50_last_tenth_ms": last,
            "kept_up": last - first < 50,
            "rate_per_s": self.rate,
            "seconds": self.seconds,
            "events": self.events,
            "handled": self.recorder.handled,
            "fell_behind": self.recorder.handled < self.events,
            "achieved_per_s": self.recorder.handled / self.recorder.window_s(),
            # the figure that travels between busy and quiet hosts: lateness does not
            "cpu_us_per_event": self.cpu_s * 1e6 / max(self.recorder.handled, 1),
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
    # the producer's garbage is the bench's, not the server's (a world's producers are
    # other processes): collected now, before the first event is due, not in the window
    gc.collect()
    recorder.ready_at = None  # its rate counts from the first handler call, not the idle start
    late_start = max(0.0, time.time() * 1000 - first_due)  # scheduling overran the lead
    cpu_before = time.process_time()
    with tqdm(total=events, desc="steady load", unit="ev", unit_scale=True) as bar:
        bar.update(recorder.handled)
        recorder.progress = bar
        await server
    cpu_s = time.process_time() - cpu_before
    if recorder.handled < events:
        console.print(
            f"[yellow]the task server fell behind: it ran {recorder.handled:,} of {events:,} "
            "events before the bench stopped it; lateness covers those[/yellow]"
        )
    steady = Steady(rate, seconds, events, recorder, late_start, cpu_s)
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
    return steady
