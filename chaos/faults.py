"""What a chaos run injects, and when.

Faults (all real: signals to real processes, real server restarts):

- ``kill_gameserver``: SIGKILL a random task server (most likely mid-batch), restart it;
- ``kill_two_gameservers``: the same for two at once;
- ``pause_gameserver``: SIGSTOP a task server for longer than its leases, then SIGCONT:
  its partitions and in-flight batches are taken over while it still holds them;
- ``restart_redis``: SIGKILL redis-server and start an empty one on the same port;
- ``restart_postgres``: stop PostgreSQL like a crash (``pg_ctl -m immediate``), start it;
- ``queue_garbage``: write malformed, oversized and unknown entries straight into the
  Redis queue (``Garbage``); each must end in a dead-letter set (or, for a durable
  entry without a DB row, be dropped without effect) while the workers keep running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgpack
from redis.asyncio import Redis

from chaos.cluster import Service, Stack

log = logging.getLogger("chaos.faults")

KINDS = (
    "kill_gameserver",
    "kill_two_gameservers",
    "pause_gameserver",
    "restart_redis",
    "restart_postgres",
    "queue_garbage",
)


@dataclass
class FaultRecord:
    kind: str
    at_s: float  # seconds after the load started
    detail: str
    duration_s: float


@dataclass(frozen=True)
class Step:
    at: float  # fraction of the load phase
    kind: str


FULL_PLAN: tuple[Step, ...] = (
    Step(0.07, "kill_gameserver"),
    Step(0.15, "pause_gameserver"),
    Step(0.25, "restart_redis"),
    Step(0.33, "kill_gameserver"),
    Step(0.41, "queue_garbage"),
    Step(0.49, "restart_postgres"),
    Step(0.58, "kill_two_gameservers"),
    Step(0.67, "pause_gameserver"),
    Step(0.76, "kill_gameserver"),
    Step(0.84, "queue_garbage"),
    Step(0.90, "kill_gameserver"),
)
BOUNDED_PLAN: tuple[Step, ...] = (
    Step(0.08, "kill_gameserver"),
    Step(0.22, "pause_gameserver"),
    Step(0.38, "restart_redis"),
    Step(0.50, "queue_garbage"),
    Step(0.62, "restart_postgres"),
    Step(0.78, "kill_two_gameservers"),
)


@dataclass
class Garbage:
    """One malformed queue entry written by a ``queue_garbage`` fault."""

    name: str
    partition: int
    blob: bytes
    member: bytes  # what the dead-letter set knows it by
    expect: str  # "dead" or "dropped"
    event_id: int | None = None


def _garbage_entries(
    rng: random.Random, partitions: int, due_ms: int, serial: int, known_bugs: bool = False
) -> list[tuple[str, int, bytes, str, int | None]]:
    """(name, partition, blob, expectation, id) of hostile entries, built with the codec.

    The default set is what the queue must dead-letter and survive. ``known_bugs`` adds
    entries that used to break it (see SECURITY.md, "Queue input"), now dead-lettered alone
    too: a header that cannot be read or whose body size is wrong made the claimed batch
    split wrongly, burying the events claimed after it; a header naming another event than
    its body ran as the body's event.
    """
    from common.queue import codec
    from common.queue.constants import HEADER_LEN, PRIORITY_BIAS

    base = (1 << 62) + (serial << 20) + rng.randrange(1 << 16) * 16  # never a real event id

    def valid(i: int, kind: str, payload: dict[str, object], durable: bool = False) -> bytes:
        return codec.encode(base + i, kind, rng.randrange(1_000_000), due_ms, 0, payload, 0,
                            durable)  # fmt: skip

    def framed(i: int, body: bytes) -> bytes:
        """A well-formed header (prefix, member, due, size) around any body."""
        return codec.HEADER_MEMORY % (PRIORITY_BIAS, base + i, due_ms, len(body)) + body

    def part() -> int:
        return rng.randrange(partitions)

    entries: list[tuple[str, int, bytes, str, int | None]] = [
        ("undecodable body", part(), framed(2, b"\xc1\xc1 not msgpack"), "dead", base + 2),
        ("body of the wrong shape", part(), framed(3, msgpack.packb([base + 3, "k"])), "dead",
         base + 3),
        ("body fields of the wrong types", part(),
         framed(4, msgpack.packb([base + 4, 7, 0, due_ms, 0, {}, 0, False])), "dead", base + 4),
        ("unknown kind", part(), valid(5, "chaos.nobody.handles", {"x": 1}), "dead", base + 5),
        ("huge noise body (2 MiB)", part(), framed(6, os.urandom(2 << 20)), "dead", base + 6),
        ("huge unknown kind (1 MiB payload)", part(),
         valid(7, "chaos.nobody.handles", {"blob": "x" * (1 << 20)}), "dead", base + 7),
        ("real kind, bad payload", part(), valid(9, "build_done", {"order_id": [1, 2]}), "dead",
         base + 9),
        ("real kind, missing payload", part(), valid(10, "march", {}), "dead", base + 10),
        ("durable without a DB row", part(), valid(11, "build_done", {"order_id": 1}, True),
         "dropped", base + 11),
    ]  # fmt: skip
    if known_bugs:
        ok, other = valid(0, "build_done", {"order_id": 1}), valid(1, "build_done", {"order_id": 2})
        entries += [
            ("shorter than a header", part(), b"chaos-%d" % serial, "dead", None),
            ("not an event blob", part(), b"\xff" * 6 + valid(8, "k", {})[6:], "dead", None),
            ("body longer than its header says", part(),
             valid(12, "k", {})[:HEADER_LEN] + os.urandom(1 << 16), "dead", base + 12),
            ("header of another event", part(), ok[:HEADER_LEN] + other[HEADER_LEN:], "dead",
             base),
        ]  # fmt: skip
    return entries


class GarbageInjector:
    def __init__(self, stack: Stack, rng: random.Random, known_bugs: bool = False) -> None:
        self.stack = stack
        self.rng = rng
        self.known_bugs = known_bugs
        self.written: list[Garbage] = []
        self._serial = 0

    async def inject(self) -> str:
        from common.queue.constants import MEMBER_LEN, PartitionKeys

        c = self.stack.config
        self._serial += 1
        entries = _garbage_entries(
            self.rng,
            c.queue_partitions,
            time.time_ns() // 1_000_000 - 5,
            self._serial,
            self.known_bugs,
        )
        redis = Redis.from_url(self.stack.redis.url)
        try:
            for name, p, blob, expect, event_id in entries:
                keys = PartitionKeys(c.redis_prefix, p)
                await redis.zadd(keys.due, {blob: time.time_ns() // 1_000_000 - 5})
                self.written.append(Garbage(name, p, blob, blob[:MEMBER_LEN], expect, event_id))
            # junk in the by-id index too (an id nothing refers to): nobody may choke on it
            keys = PartitionKeys(c.redis_prefix, self.rng.randrange(c.queue_partitions))
            index = getattr(keys, "byid", None) or getattr(keys, "payload", None)
            if index:
                await redis.hset(index, b"%016x" % ((1 << 62) + self._serial), b"\x00junk")
            # a malformed wake-up message, then real ones: the garbage is due now
            await redis.publish(keys.channel, b"junk,\xff:1,3:not-a-time")
            wake = b",".join(b"%d:0" % g.partition for g in self.written[-len(entries) :])
            await redis.publish(keys.channel, wake)
        finally:
            await redis.aclose()
        return f"{len(entries)} malformed entries"


class FaultInjector:
    def __init__(
        self,
        stack: Stack,
        plan: tuple[Step, ...],
        load_s: float,
        *,
        pause_s: float,
        seed: int,
        known_bugs: bool = False,
    ) -> None:
        self.stack = stack
        self.plan = plan
        self.load_s = load_s
        self.pause_s = pause_s
        self.rng = random.Random(seed)
        self.garbage = GarbageInjector(stack, self.rng, known_bugs)
        self.records: list[FaultRecord] = []
        self.errors: list[str] = []
        self.down: set[str] = set()  # services killed on purpose and not restarted yet
        self._started = 0.0

    def _alive_gameservers(self) -> list[Service]:
        return [s for s in self.stack.gameservers if s.alive()]

    async def run(self, stop: asyncio.Event) -> None:
        self._started = time.monotonic()
        for step in self.plan:
            at = self._started + step.at * self.load_s
            while time.monotonic() < at:
                if stop.is_set():
                    return
                await asyncio.sleep(min(0.2, at - time.monotonic()))
            try:
                await self.perform(step.kind)
            except Exception as exc:  # a fault that failed is a finding of the run
                log.exception("fault %s failed", step.kind)
                self.errors.append(f"{step.kind}: {type(exc).__name__}: {exc}")

    async def _timed(self, kind: str, action: Callable[[], object], detail: str) -> None:
        at = time.monotonic() - self._started
        started = time.monotonic()
        result = action()
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, str):
            detail = f"{detail} ({result})" if detail else result
        self.records.append(FaultRecord(kind, at, detail, time.monotonic() - started))
        log.warning("fault at %.0f s: %s %s", at, kind, detail)

    async def perform(self, kind: str) -> None:
        if kind in ("kill_gameserver", "kill_two_gameservers"):
            n = 2 if kind == "kill_two_gameservers" else 1
            victims = self.rng.sample(self._alive_gameservers(), k=n)

            async def kill() -> str:
                self.down.update(v.name for v in victims)
                for v in victims:
                    v.kill()
                pause = self.rng.uniform(1.0, 4.0)
                await asyncio.sleep(pause)
                for v in victims:
                    v.start()
                    self.down.discard(v.name)
                return f"restarted {pause:.1f} s later"

            await self._timed(kind, kill, ", ".join(f"{v.name} (pid {v.pid})" for v in victims))
        elif kind == "pause_gameserver":
            victim = self.rng.choice(self._alive_gameservers())

            async def pause() -> str:
                victim.signal(signal.SIGSTOP)
                await asyncio.sleep(self.pause_s)
                victim.signal(signal.SIGCONT)
                return f"SIGSTOP {self.pause_s:.0f} s, SIGCONT"

            await self._timed(kind, pause, f"{victim.name} (pid {victim.pid})")
        elif kind == "restart_redis":
            await self._timed(
                kind, lambda: asyncio.to_thread(self.stack.redis.restart_empty), "empty"
            )
        elif kind == "restart_postgres":
            await self._timed(
                kind, lambda: asyncio.to_thread(self.stack.pg.crash_restart), "pg_ctl -m immediate"
            )
        elif kind == "queue_garbage":
            await self._timed(kind, self.garbage.inject, "")
        else:  # pragma: no cover - a typo in a plan
            raise ValueError(f"unknown fault {kind!r}")

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for r in self.records:
            out[r.kind] += 1
        return out


@dataclass
class Timeline:
    """Samples taken during the load: marches in flight and live processes."""

    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, marches, pending)

    @property
    def max_marches(self) -> int:
        return max((m for _, m, _ in self.samples), default=0)
