"""Lateness under a steady load: events due at a fixed rate, run by an idle task server."""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from redis.asyncio import Redis

from bench.queue.memory import check_memory
from bench.queue.runner import (
    Recorder,
    bench_registry,
    due_at,
    lateness_percentiles,
    run_task_server,
    schedule_ours,
)


@dataclass
class Steady:
    """A steady run's record: a warm-up of ``warmup_s`` at ``rate``, then the measured
    ``seconds`` (``events`` due in them, from ``window_from_ms`` on)."""

    rate: float
    seconds: float
    events: int
    recorder: Recorder
    late_start_ms: float  # how long after the first due time the scheduling ended (0: before)
    warmup_s: float = 0.0
    window_from_ms: int = 0  # due time of the first measured event
    cpu_s: float = 0.0  # process CPU (all threads) through the measured window

    @cached_property
    def _split(self) -> tuple[Any, Any, Any]:
        """(due, lateness) of the measured events, and the lateness of the warm-up's: read
        once the run is over (each read copies the recorder's arrays)."""
        import numpy as np

        due = np.frombuffer(self.recorder.due_ms, dtype=np.int64)
        late = np.frombuffer(self.recorder.lateness_ms, dtype=np.float64)
        measured = due >= self.window_from_ms
        return due[measured], late[measured], late[~measured]

    def handled(self) -> int:
        """Measured events run (a redelivered one counts again)."""
        return len(self._split[1])

    def lateness(self) -> dict[str, float]:
        return lateness_percentiles(self._split[1].tolist())

    def warmup_lateness(self) -> dict[str, float]:
        return lateness_percentiles(self._split[2].tolist())

    def backlog_ms(self) -> tuple[float, float]:
        """Median lateness of the first and of the last tenth of the measured events by
        due time.

        A server that keeps up has about the same at both ends; one that does
        not piles up a backlog, and the lateness grows through the run.
        """
        import numpy as np

        due, late, _ = self._split
        if len(due) < 20:
            return 0.0, 0.0
        ordered = late[np.argsort(due, kind="stable")]
        tenth = len(ordered) // 10
        return float(np.median(ordered[:tenth])), float(np.median(ordered[-tenth:]))

    def summary(self) -> dict[str, Any]:
        from gameserver.config import TaskServerConfig

        first, last = self.backlog_ms()
        handled = self.handled()
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
            "handled": handled,
            "fell_behind": self.recorder.handled < self.recorder.expected,
            "achieved_per_s": self.recorder.handled / self.recorder.window_s(),
            # the figure that travels between busy and quiet hosts: lateness does not
            "cpu_us_per_event": self.cpu_s * 1e6 / max(handled, 1),
            "lateness_ms": self.lateness(),
            # the same flow before the measured window: an idle server's first seconds
            # under it, when its memory is first touched (reported, not hidden)
            "warmup_s": self.warmup_s,
            "warmup_lateness_ms": self.warmup_lateness(),
            "scheduling_overran_first_due_ms": self.late_start_ms,
        }

    def draw(self, ax: Any, capacity: float) -> None:
        values = self._split[1].tolist()
        lat = self.lateness()
        top = max(1.0, lat["max"])
        ax.hist(values, bins=100, range=(min(0.0, min(values, default=0.0)), top), log=True)
        for name, style in (("p50", ":"), ("p99", "--"), ("max", "-")):
            ax.axvline(lat[name], color="black", linestyle=style, linewidth=0.8,
                       label=f"{name} {lat[name]:.1f} ms")  # fmt: skip
        ax.set_xlabel("lateness: handler start - due time (ms)")
        ax.set_ylabel("events")
        ax.set_title(
            f"lateness at {self.rate:,.0f} events/s for {self.seconds:.0f} s after "
            f"{self.warmup_s:g} s of warm-up ({self.rate / max(capacity, 1e-9):.0%} of the "
            "measured dispatch rate)"
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
        if self.warmup_s:
            ax.axvspan(0, self.warmup_s, color="grey", alpha=0.15, label="warm-up (not measured)")
            ax.legend(loc="upper right")
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
    warmup_s: float = 0.0,
) -> Steady:
    """Events due at ``rate``/s for ``warmup_s`` and then ``seconds``, run by a TaskServer;
    the lateness and CPU of the last ``seconds`` are the measure.

    The server starts first and idles; then every event is scheduled, due from
    ``first_due`` on, which leaves twice the expected scheduling time: so the
    server only runs events once the producer is done (it does not share the
    event loop with the bench's scheduling while it is measured). A world's task
    server runs a flow it has been running; this one starts idle, so the flow's
    first seconds, when its memory is first touched, are the warm-up, reported apart.
    """
    from tqdm import tqdm

    from bench.report import console
    from common.clock import SYSTEM_CLOCK
    from common.queue import EventQueue

    warmup_events = int(rate * warmup_s)
    events = max(1, int(rate * seconds))
    total = warmup_events + events
    await check_memory(redis, "redis://127.0.0.1", total)  # counted as local: conservative
    recorder = Recorder(total, keep_due=True)
    ready = asyncio.Event()
    lead_s = total / max(schedule_rate, 1.0) * 2 + 2.0
    run = run_task_server(
        settings, bench_registry(recorder), recorder, burst=False, batch=batch,
        timeout_s=60 + lead_s + warmup_s + seconds + max(30.0, 3 * seconds), ready=ready,
        partial_ok=True,
    )  # fmt: skip
    server = asyncio.create_task(run)
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait([waiter, server], return_when=asyncio.FIRST_COMPLETED)
    if server.done():
        server.result()  # it failed to start: raise its error
    first_due = int(time.time() * 1000 + lead_s * 1000)
    window_from = due_at(first_due, warmup_events, rate)
    queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)
    with tqdm(total=total, desc=f"schedule steady load ({rate:,.0f}/s)", unit="ev",
              unit_scale=True) as bar:  # fmt: skip
        await schedule_ours(queue, total, first_due, rate, bar)
    await queue.aclose()
    # the producer's garbage is the bench's, not the server's (a world's producers are
    # other processes): collected now, before the first event is due, not in the window
    gc.collect()
    recorder.ready_at = None  # its rate counts from the first handler call, not the idle start
    late_start = max(0.0, time.time() * 1000 - first_due)  # scheduling overran the lead
    cpu_at_window = asyncio.create_task(_cpu_at(window_from))
    with tqdm(total=total, desc="steady load", unit="ev", unit_scale=True) as bar:
        bar.update(recorder.handled)
        recorder.progress = bar
        await server
    cpu_s = time.process_time() - await cpu_at_window
    if recorder.handled < total:
        console.print(
            f"[yellow]the task server fell behind: it ran {recorder.handled:,} of {total:,} "
            "events before the bench stopped it; lateness covers those[/yellow]"
        )
    steady = Steady(rate, seconds, events, recorder, late_start, warmup_s, window_from, cpu_s)
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


async def _cpu_at(wall_ms: int) -> float:
    """This process's CPU time (all threads) at ``wall_ms``, or now if that has passed."""
    await asyncio.sleep(max(0.0, wall_ms / 1000 - time.time()))
    return time.process_time()
