"""The load generator (``python -m bench.world load SPEC.json RESULT.json``): simulated
players over the real HTTP API, open loop (each request is due at a time the model decides,
whatever the answers before it; its latency counts from that time, so a slow server cannot
slow the load down and hide its own slowness)."""

from __future__ import annotations

import asyncio
import gc
import heapq
import json
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httptools
import orjson

from bench.report import percentiles
from bench.world.http_client import Client
from bench.world.model import PlayerModel
from common.entrypoint import serve_on
from common.settings import load_settings

# what the 2-minute command builds (the reference game's resource fields and storage)
BUILD_KINDS = ("woodcutter", "clay_pit", "iron_mine", "cropland", "warehouse", "granary")
TRAIN = {"unit": "legionnaire", "count": 1}
RAID = {"legionnaire": 2}
REFUSED = 409  # a game rule said no (cannot pay, queue full, too late to recall)
GONE = 404  # the march to recall has arrived meanwhile
# actions measured (and held to a service level) under another kind besides their own: a
# fetch after a push is a snapshot GET like a poll
_MEASURED_AS = {"order": "command", "march": "command", "recall": "command", "fetch": "poll"}
NO_FULL_COLLECTION = 1_000_000  # young collections before a full one: never in a step
TIMEOUT_S = 10.0  # a request unanswered this long is an error
DRAIN_S = 12.0  # after the window: requests in flight finish


@dataclass
class Sim:
    player_id: int
    name: str
    token: str
    village_id: int
    target: tuple[int, int]
    push: bool
    etag: str | None = None
    fetching: int = -1  # the pushed version a fetch is under way for


@dataclass
class Tally:
    """What was measured: latencies of requests due inside the window, errors by phase."""

    start: float
    end: float
    latency: dict[str, list[float]] = field(default_factory=dict)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    warmup_errors: dict[str, int] = field(default_factory=dict)
    lag: list[float] = field(default_factory=list)
    stream_events: int = 0
    streams_open: int = 0
    cpu_at: dict[str, float] = field(default_factory=dict)  # the process's CPU s at start, end

    def mark_cpu(self, when: str) -> None:
        self.cpu_at[when] = time.process_time()

    def inside(self, at: float) -> bool:
        return self.start <= at < self.end

    def done(self, kind: str, due: float, outcome: str) -> None:
        if self.inside(due):
            self.latency.setdefault(kind, []).append(time.perf_counter() - due)
            by = self.outcomes.setdefault(kind, {})
            by[outcome] = by.get(outcome, 0) + 1

    def error(self, at: float, reason: str) -> None:
        into = self.errors if self.inside(at) else self.warmup_errors if at < self.start else None
        if into is not None:
            into[reason] = into.get(reason, 0) + 1


class Stream(asyncio.Protocol):
    """One player's ``GET /api/events``: counts the events it is pushed and tells
    ``on_version`` of each ``version`` event's version (the page fetches its snapshot)."""

    def __init__(
        self, request: bytes, tally: Tally, on_version: Callable[[int], None] | None = None
    ) -> None:
        self.request, self.tally, self.on_version = request, tally, on_version
        self.started = False
        self.closing = False
        self.head = b""
        self.partial = b""  # an event whose end has not arrived yet

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.started:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            status = self.head.split(b"\r\n", 1)[0]
            if b" 200 " not in status:
                self.tally.error(time.perf_counter(), "stream_refused")
                return
            self.started = True
            self.tally.streams_open += 1
            data = self.head.split(b"\r\n\r\n", 1)[1]
        *events, self.partial = (self.partial + data).split(b"\n\n")
        self.tally.stream_events += len(events)
        if self.on_version is None:
            return
        for event in events:
            # an event may follow the chunked encoding's size line of its write
            at = event.find(b"event: version\n")
            if at >= 0:
                data_line = event[at:].split(b"\n", 2)[1]
                self.on_version(int(json.loads(data_line.removeprefix(b"data: "))["version"]))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.started:
            self.tally.streams_open -= 1
        if not self.closing:
            # a reset is how the server drops a client that fell behind (webfront.push)
            reason = "stream_reset" if isinstance(exc, ConnectionResetError) else "stream_closed"
            self.tally.error(time.perf_counter(), reason)


class Generator:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.model = PlayerModel(**spec["model"])
        self.url = spec["url"]
        self.host = self.url.split("//", 1)[1]
        self.rng = random.Random(spec["seed"])
        self.sims = [Sim(**p) for p in spec["players"]]
        self.warmup_s, self.window_s = float(spec["warmup_s"]), float(spec["window_s"])
        self.connections = int(spec["connections"])
        self.start_at = float(spec["start_at"])  # wall-clock second the run begins
        self.heap: list[tuple[float, int, str, int, int]] = []
        self.seq = 0
        self.run = secrets.token_hex(4)
        self.tasks: set[asyncio.Task[None]] = set()
        self.streams: list[tuple[asyncio.BaseTransport, Stream]] = []
        self.t0 = 0.0
        self.tally = Tally(0.0, 0.0)
        host, port = self.host.rsplit(":", 1)
        self.http = Client(host, int(port), self.connections, TIMEOUT_S)
        self.streams_at_end = 0

    def at(self, due: float, action: str, who: int, arg: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, action, who, arg))

    def jitter(self, mean: float) -> float:
        return mean * self.rng.uniform(0.5, 1.5)

    async def main(self) -> dict[str, Any]:
        await asyncio.sleep(max(0.0, self.start_at - time.time()))
        self.t0 = t0 = time.perf_counter()
        self.tally = Tally(t0 + self.warmup_s, t0 + self.warmup_s + self.window_s)
        # the generator's own CPU over the window, read here: the process ends right after
        # the window, maybe before the parent could read it from /proc
        asyncio.get_running_loop().call_later(self.warmup_s, self.tally.mark_cpu, "start")
        arrive_over = self.warmup_s * 0.8  # logins spread over the warm-up
        for i in range(len(self.sims)):
            self.at(t0 + self.rng.uniform(0, arrive_over), "arrive", i)
        logins = len(self.sims) * self.model.logins_per_online_player_s()
        if logins > 0 and self.sims:
            self.at(t0 + self.rng.expovariate(logins), "login", 0)
        try:
            await self.dispatch(logins)
            await asyncio.sleep(max(0.0, self.tally.end - time.perf_counter()))
            self.tally.mark_cpu("end")
            if self.tasks:
                await asyncio.wait(self.tasks, timeout=DRAIN_S)
            self.streams_at_end = self.tally.streams_open
            for transport, stream in self.streams:
                stream.closing = True
                transport.close()
        finally:
            self.http.close()
        return self.result()

    async def dispatch(self, logins: float) -> None:
        end = self.tally.end
        while self.heap:
            due = self.heap[0][0]
            if due >= end:
                return
            now = time.perf_counter()
            if due > now:
                await asyncio.sleep(due - now)
                continue
            _, _, action, who, arg = heapq.heappop(self.heap)
            if self.tally.inside(due):
                self.tally.lag.append(now - due)
            if action == "login":
                self.at(due + self.rng.expovariate(logins), "login", 0)
                who = self.rng.randrange(len(self.sims))
            task = asyncio.create_task(self.act(action, who, arg, due))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def act(self, action: str, who: int, arg: int, due: float) -> None:
        sim = self.sims[who]
        kind = _MEASURED_AS.get(action, action)
        try:
            outcome = await getattr(self, f"do_{action}")(sim, who, arg, due)
        except TimeoutError:
            self.tally.error(due, f"{action}_timeout")
        except (OSError, httptools.HttpParserError) as exc:
            self.tally.error(due, f"{action}_{type(exc).__name__}")
        else:
            if outcome.startswith("error"):
                self.tally.error(due, f"{action}_{outcome}")
            self.tally.done(kind, due, outcome)
            if kind != action:
                self.tally.done(action, due, outcome)

    def auth(self, sim: Sim) -> dict[str, str]:
        return {"Authorization": f"Bearer {sim.token}"}

    async def do_arrive(self, sim: Sim, who: int, _arg: int, due: float) -> str:
        """The page loads: a full snapshot and the stream; the player's routine begins (even
        when these failed: a player retries, and the failure is counted)."""
        m = self.model
        poll = m.push_poll_interval_s if sim.push else m.poll_interval_s
        self.at(due + self.rng.uniform(0, poll), "poll", who)  # each page's own phase
        self.at(due + self.rng.uniform(0, m.command_interval_s), "order", who)
        self.at(due + self.rng.uniform(0, m.march_interval_s), "march", who)
        outcome = await self.snapshot(sim, None)
        if sim.push:
            await self.open_stream(sim, who)
        return outcome

    def pushed(self, who: int, version: int) -> None:
        """A ``version`` event: as the SDK's poller does, fetch the snapshot at once when
        the version is newer than the one held (and not already being fetched)."""
        sim = self.sims[who]
        held = int(sim.etag.removeprefix("W/").strip('"')) if sim.etag else -1
        if version <= max(held, sim.fetching):
            return
        sim.fetching = version
        task = asyncio.create_task(self.act("fetch", who, 0, time.perf_counter()))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def do_fetch(self, sim: Sim, _who: int, _arg: int, _due: float) -> str:
        try:
            return await self.snapshot(sim, sim.etag or '"0"')
        finally:
            sim.fetching = -1

    async def snapshot(self, sim: Sim, etag: str | None) -> str:
        headers = self.auth(sim)
        if etag:
            headers["If-None-Match"] = etag
        answer = await self.http.request("GET", "/api/snapshot", headers)
        if answer.status == 200:
            sim.etag = answer.etag
            return "full"
        return "not_modified" if answer.status == 304 else f"error_{answer.status}"

    async def do_poll(self, sim: Sim, who: int, _arg: int, due: float) -> str:
        m = self.model
        self.at(due + (m.push_poll_interval_s if sim.push else m.poll_interval_s), "poll", who)
        return await self.snapshot(sim, sim.etag or '"0"')

    async def post(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[str, Any]:
        """POST a JSON body: ("done", the answer's JSON), ("refused", None) or
        ("error_<status>", None)."""
        headers["Content-Type"] = "application/json"
        answer = await self.http.request("POST", path, headers, orjson.dumps(body))
        if answer.status in (200, 201):
            try:
                return "done", orjson.loads(answer.body)
            except orjson.JSONDecodeError:
                return "error_body", None
        if answer.status == REFUSED:
            return "refused", None
        return f"error_{answer.status}", None

    async def command(self, sim: Sim, path: str, body: dict[str, Any]) -> tuple[str, Any]:
        self.seq += 1
        headers = {**self.auth(sim), "Idempotency-Key": f"w{self.run}-{self.seq}"}
        return await self.post(path, body, headers)

    async def do_order(self, sim: Sim, who: int, _arg: int, due: float) -> str:
        """The 2-minute command: train or build."""
        m = self.model
        self.at(due + self.jitter(m.command_interval_s), "order", who)
        if self.rng.random() < m.train_share:
            body: dict[str, Any] = {"village_id": sim.village_id, **TRAIN}
            return (await self.command(sim, "/api/train", body))[0]
        body = {"village_id": sim.village_id, "kind": self.rng.choice(BUILD_KINDS)}
        return (await self.command(sim, "/api/build", body))[0]

    async def do_march(self, sim: Sim, who: int, _arg: int, due: float) -> str:
        m = self.model
        self.at(due + self.jitter(m.march_interval_s), "march", who)
        x, y = sim.target
        body = {"village_id": sim.village_id, "kind": "raid", "x": x, "y": y, "troops": RAID}
        outcome, data = await self.command(sim, "/api/march", body)
        if outcome == "done" and self.rng.random() < m.recall_share:
            self.at(time.perf_counter() + m.recall_after_s, "recall", who, int(data["march_id"]))
        return outcome

    async def do_recall(self, sim: Sim, _who: int, march_id: int, _due: float) -> str:
        outcome = (await self.command(sim, "/api/recall", {"march_id": march_id}))[0]
        # a march that already arrived is gone: too late to recall, as the game says
        return "refused" if outcome == f"error_{GONE}" else outcome

    async def do_login(self, sim: Sim, who: int, _arg: int, _due: float) -> str:
        """A password login from the player's own address (behind the trusted proxy)."""
        from bench.world.stack import PASSWORD

        address = f"10.{who >> 16 & 255}.{who >> 8 & 255}.{who & 255}"
        body = {"name": sim.name, "password": PASSWORD}
        outcome, data = await self.post("/api/login", body, {"X-Forwarded-For": address})
        if outcome == "done":
            sim.token = str(data["token"])
        return outcome

    async def open_stream(self, sim: Sim, who: int) -> None:
        host, port = self.host.rsplit(":", 1)
        request = (
            f"GET /api/events HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer "
            f"{sim.token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
        loop = asyncio.get_running_loop()
        transport, stream = await loop.create_connection(
            lambda: Stream(request, self.tally, lambda version: self.pushed(who, version)),
            host,
            int(port),
        )
        self.streams.append((transport, stream))

    def result(self) -> dict[str, Any]:
        t = self.tally
        return {
            "players": len(self.sims),
            "streams": sum(1 for s in self.sims if s.push),
            "streams_open_at_end": self.streams_at_end,
            "stream_events": t.stream_events,
            "latency_ms": {k: [round(v * 1000, 2) for v in vs] for k, vs in t.latency.items()},
            "outcomes": t.outcomes,
            "errors": t.errors,
            "warmup_errors": t.warmup_errors,
            "start_lag_ms": {k: v * 1000 for k, v in percentiles(t.lag).items()},
            "started": len(t.lag),
            "cpu_s": t.cpu_at.get("end", 0.0) - t.cpu_at.get("start", 0.0),
        }


def main(spec_path: str, result_path: str) -> None:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    generator = Generator(spec)
    # A process lives one step and its players' state all of it: a full collection would
    # walk that state (hundreds of thousands of objects) and stop the generator meanwhile,
    # and every answer arriving then would be charged to the stack's latency. So the state
    # made so far is frozen out of the collector's sight, and only the young generations
    # are collected during the step (garbage cycles left in the old one live as long as
    # the process, a minute).
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, NO_FULL_COLLECTION)
    # the servers' event loop (EVENT_LOOP): uvloop's wake-ups cost the generator less too
    result = serve_on(load_settings().event_loop, generator.main())
    # a file, not standard output: a child on uvloop whose parent runs asyncio's loop can
    # lose the end of a large write to its pipe
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
