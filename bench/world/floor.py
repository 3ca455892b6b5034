"""The floor beside the stack: what a measured step's traffic costs on bare parts.

The step search says how many players the stack holds; the floor says how far that is
from what the parts themselves cost on this machine, measured in the same run. The basis
step's traffic (its HTTP requests, snapshot builds, commands and events per second, as
measured) is replayed at the same rates on bare parts, one kind at a time, after the
stack has stopped, on the world's own database:

- every HTTP request: bare aiohttp answering "hello" (``bench.web``'s hello servers, as
  many processes as the web tier runs): no session, no Redis, no JSON;
- every snapshot build (a poll or a fetch answered in full): the game's snapshot
  statement on asyncpg, run as the web tier's reads run it (generic plan, no JIT), its
  rows not decoded; the reads are dealt in turn to one gatherer per web process, which
  batches them as the process does (``WebConfig``'s gather window, batch and slots,
  ``common.batch_slots``), so a statement reads as many players as the stack's would;
- every command: a hand-written build (a conditional spend, an order row, an event row,
  an idempotency row) in a random player's village of the step, gathered as the web tier
  gathers commands' closing statements (``WebConfig``'s writers, batch and gather window):
  a batch of builds in one set-based statement, one commit (``bench.web.bare_commands``'s
  ``run_many``); a village that cannot pay gets nothing, as its player's commands;
- every event: the hand-written build of ``bench web``'s command ceiling (the same four
  writes), gathered as the task servers gather their events' transactions
  (``TaskServerConfig``'s event slots, batch and window, ``common.queue.gathered``): a
  batch in one set-based statement, one commit. An event does at least as much.

- every login: one password hash with the production parameters (``WebConfig.password_hash``),
  its CPU measured on this machine: a login costs at least that wherever it runs.

Redis and the event streams cost nothing at the floor. It is a lower bound of the work the
traffic needs, not a design: CPU per player per tier at the floor, the players these cores
would hold at it, and the stack's CPU per player against it.

The target's players (``target_figures``) send the same traffic per player at rates no
paced probe from one process reaches, so there each kind is costed at its cheapest: the
database work at its own rate (at most ``MAX_PROBE_RATE``), every HTTP request at what bare
aiohttp spends on one when it answers as fast as it can (``http_cost_at_saturation``: a
cost falls as the rate rises, so no rate makes it cheaper), every login a hash, and the
commands gathered as the stack gathers them or in a ``TARGET_COMMAND_GATHER_MS`` window,
whichever is cheaper.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
import asyncpg
from sqlalchemy.dialects import postgresql

from bench.web.bare_commands import BareBuild
from bench.web.load import LoadGenerator
from bench.web.model import Req
from bench.web.servers import Servers
from bench.world.model import REQUEST_KINDS
from bench.world.stack import SimPlayer, process_cpu_ns
from common.batch_slots import BatchSlots
from db.driver import Prepared
from db.engine import asyncpg_connect_args
from gameapi.loading import load_game
from gameserver.config import TaskServerConfig
from webfront.config import WebConfig
from webfront.passwords import hash_password
from webfront.snapshot import READ_SESSION
from webfront.snapshot_build import builder_of

CONCURRENCY = 64  # operations in flight at most per probe (the load is open loop)
HTTP_CONNECTIONS = 256
# the fastest a database probe runs: one bench process paces about this many operations a
# second on its connections (per-operation costs fall as rates rise, and level off)
MAX_PROBE_RATE = 3_000.0
POOL = 4  # database connections of a probe, each prepared before the measure
WARMUP_S = 1.0
SATURATION_CONNECTIONS = 64  # requests in flight on the hello servers at saturation
HASHES = 3  # password hashes timed; the cheapest counts
# the target's commands are priced gathered in this window too (``command_gather_ms``; the
# stack's default gathers only behind a busy writer, which rarely pays at a step's rates):
# a wait its players would hardly notice against the command's 250 ms service level
TARGET_COMMAND_GATHER_MS = 10


@dataclass(frozen=True)
class Traffic:
    """What a step carried, per second of its window."""

    players: int
    requests_per_s: float
    builds_per_s: float  # polls (fetches among them) answered with a whole snapshot
    commands_per_s: float
    events_per_s: float
    logins_per_s: float = 0.0

    @staticmethod
    def of(step: Mapping[str, Any], window_s: float) -> Traffic:
        requests, outcomes = step["requests"], step["outcomes"]
        return Traffic(
            players=step["players"],
            requests_per_s=sum(requests.get(k, 0) for k in REQUEST_KINDS) / window_s,
            builds_per_s=outcomes.get("poll", {}).get("full", 0) / window_s,
            commands_per_s=requests.get("command", 0) / window_s,
            events_per_s=step["event_lateness"]["count"] / window_s,
            logins_per_s=requests.get("login", 0) / window_s,
        )

    def scaled(self, players: int) -> Traffic:
        """The same traffic per player, for ``players`` players."""
        k = players / self.players
        return Traffic(
            players, self.requests_per_s * k, self.builds_per_s * k, self.commands_per_s * k,
            self.events_per_s * k, self.logins_per_s * k,
        )  # fmt: skip


@dataclass(frozen=True)
class Costs:
    """CPU microseconds of one operation on bare parts, at the rate the step ran it."""

    http_server: float
    build_postgres: float
    build_client: float
    command_postgres: float
    command_client: float
    event_postgres: float
    event_client: float
    password_hash: float = 0.0  # one login's hash, wherever it runs
    command_gather_ms: int = 0  # the window the commands were gathered in (not a cost)

    def per_operation(self) -> dict[str, float]:
        return {k: round(v, 1) for k, v in asdict(self).items() if k != "command_gather_ms"}


async def paced(rate: float, seconds: float, op: Callable[[], Awaitable[object]]) -> int:
    """Start ``op()`` ``rate`` times a second for ``seconds``, on schedule whatever the
    earlier ones do (at most ``CONCURRENCY`` at once); how many ran."""
    count = max(1, round(rate * seconds))
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one() -> None:
        async with slots:
            await op()

    started = time.perf_counter()
    tasks = []
    for i in range(count):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return count


def cpu_ns(pids: Sequence[int]) -> int:
    """Nanoseconds the threads of ``pids`` have run (``stack.process_cpu_ns``)."""
    return sum(map(process_cpu_ns, pids))


Tiers = Mapping[str, Callable[[], Sequence[int]]]  # tier -> its pids now


async def _cpu_us_per_op(
    tiers: Tiers, rate: float, seconds: float, op: Callable[[], Awaitable[object]]
) -> dict[str, float]:
    """Each tier's CPU microseconds per ``op`` at ``rate`` (after a second at that rate
    unmeasured: connections opened, statements prepared, as in a long run)."""
    if rate <= 0:  # the step did none of it
        return dict.fromkeys(tiers, 0.0)
    await paced(rate, min(WARMUP_S, seconds), op)
    before = {tier: cpu_ns(pids()) for tier, pids in tiers.items()}
    count = await paced(rate, seconds, op)
    return {
        tier: max(0, cpu_ns(pids()) - before[tier]) / 1000 / count for tier, pids in tiers.items()
    }


async def http_cost(rate: float, seconds: float, workers: int) -> float:
    servers = await Servers("hello", workers).start()
    try:
        connector = aiohttp.TCPConnector(limit=HTTP_CONNECTIONS)
        async with aiohttp.ClientSession(connector=connector) as http:
            url = servers.url + "/hello"

            async def get() -> None:
                async with http.get(url) as response:
                    await response.read()

            tiers = {"server": lambda: servers.pids}
            return (await _cpu_us_per_op(tiers, rate, seconds, get))["server"]
    finally:
        servers.stop()


async def http_cost_at_saturation(workers: int, seconds: float) -> float:
    """Server CPU µs of one request to bare aiohttp ("hello", ``workers`` processes) driven
    as fast as it answers (wrk, or the Python client where wrk is absent): the least it
    spends on a request on these cores, since a busier server spends less on each."""
    servers = await Servers("hello", workers).start()
    try:
        load = LoadGenerator.pick("auto", threads=1)
        hello = [Req("GET", "/hello", {})]
        await load.run("warm-up", servers.url, hello, SATURATION_CONNECTIONS, WARMUP_S)
        before = cpu_ns(servers.pids)
        result = await load.run("hello", servers.url, hello, SATURATION_CONNECTIONS, seconds)
        used = cpu_ns(servers.pids) - before
        return used / 1000 / max(1, result.requests)
    finally:
        servers.stop()


def password_hash_cost() -> float:
    """CPU µs of one password hash with the production parameters (the cheapest of a few:
    the thread's own CPU time, which other work on the machine does not add to)."""
    params = WebConfig().password_hash
    spent = []
    for _ in range(HASHES):
        started = time.thread_time_ns()
        hash_password("a password of a bench", params)
        spent.append(time.thread_time_ns() - started)
    return min(spent) / 1000


def _pool(dsn: str, settings: dict[str, str]) -> asyncpg.Pool:
    """Connected as ``db.engine`` connects (its snapshot statement stays prepared, no JIT)."""
    given = asyncpg_connect_args({"server_settings": settings})
    return asyncpg.create_pool(dsn, min_size=POOL, max_size=POOL, **given)


async def _measured(
    pool: asyncpg.Pool,
    prepare_on: Callable[[asyncpg.Connection], Awaitable[None]],
    op: Callable[[], Awaitable[None]],
    rate: float,
    seconds: float,
) -> tuple[float, float]:
    """(PostgreSQL, client) CPU µs of ``op`` at ``rate``, its statements prepared on each
    of the pool's connections first (``prepare_on``); PostgreSQL's CPU is that of the
    pool's own backends (not of an autovacuum the stack's run left behind), the client's
    this process's."""
    held = [await pool.acquire() for _ in range(POOL)]
    try:
        backends = [conn.get_server_pid() for conn in held]
        for conn in held:
            await prepare_on(conn)
    finally:
        for conn in held:
            await pool.release(conn)
    me = os.getpid()
    tiers = {"postgres": lambda: backends, "client": lambda: [me]}
    used = await _cpu_us_per_op(tiers, rate, seconds, op)
    return used["postgres"], used["client"]


class _Gathered:
    """Work batched as one web process batches it (``common.batch_slots``: at most ``slots``
    statements at once, up to ``max_batch`` items each, one no sooner than ``gather_ms``
    after the last): its snapshot reads (``webfront.snapshot_reads``) or its commands'
    closing statements (``db.shared_writes``)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        run_on: Callable[[asyncpg.Connection, list[Any]], Awaitable[None]],
        slots: int,
        max_batch: int,
        gather_ms: int,
    ) -> None:
        self.pool = pool
        self.run_on = run_on
        self.max_batch = max_batch
        self.waiting: list[tuple[Any, asyncio.Future[None]]] = []
        self.runners = BatchSlots(slots, self._run, lambda: bool(self.waiting), gather_ms)

    async def run(self, item: Any) -> None:
        done = asyncio.get_running_loop().create_future()
        self.waiting.append((item, done))
        self.runners.wake()
        await done

    async def _run(self) -> None:
        batch = self.waiting[: self.max_batch]
        del self.waiting[: self.max_batch]
        if not batch:
            return
        try:
            async with self.pool.acquire() as conn:
                await self.run_on(conn, [item for item, _ in batch])
        except Exception as exc:
            for _, done in batch:
                done.set_exception(exc)
            return
        for _, done in batch:
            done.set_result(None)


def _dealt(
    web_workers: int,
    pool: asyncpg.Pool,
    run_on: Callable[[asyncpg.Connection, list[Any]], Awaitable[None]],
    slots: int,
    max_batch: int,
    gather_ms: int,
) -> Callable[[Any], Awaitable[None]]:
    """One ``_Gathered`` per web process, the work dealt to them in turn: runs an item on
    the next one."""
    processes = itertools.cycle(
        [_Gathered(pool, run_on, slots, max_batch, gather_ms) for _ in range(web_workers)]
    )

    async def run(item: Any) -> None:
        await next(processes).run(item)

    return run


async def build_cost(
    dsn: str,
    game: str,
    players: Sequence[SimPlayer],
    rate: float,
    seconds: float,
    web_workers: int,
) -> tuple[float, float]:
    """(PostgreSQL, client) µs of one player's snapshot read: ``game``'s snapshot
    statement, the reads gathered as ``web_workers`` web processes gather them."""
    builder = builder_of(load_game(game))
    dialect = postgresql.asyncpg.dialect()  # type: ignore[attr-defined]
    statement = builder.statement_for(dialect)
    prepared = Prepared(statement, builder.compiled(dialect))
    sql = prepared.compiled.string
    async with _pool(dsn, READ_SESSION) as pool:

        async def read_on(conn: asyncpg.Connection, ids: list[int]) -> None:
            await conn.fetch(sql, *prepared.arguments({"ids": sorted(set(ids))}))

        async def prepare_on(conn: asyncpg.Connection) -> None:
            await read_on(conn, [random.choice(players).player_id])

        config = WebConfig()
        read = _dealt(web_workers, pool, read_on, config.snapshot_builds,
                      config.snapshot_batch, config.snapshot_gather_ms)  # fmt: skip

        async def op() -> None:
            await read(random.choice(players).player_id)

        return await _measured(pool, prepare_on, op, rate, seconds)


async def event_cost(
    dsn: str, players: Sequence[SimPlayer], rate: float, seconds: float, task_servers: int
) -> tuple[float, float]:
    """(PostgreSQL, client) µs of one event: a hand-written build, the builds gathered into
    set-based statements as ``task_servers`` task servers gather their events'
    transactions (``TaskServerConfig``'s slots, batch and window)."""
    config = TaskServerConfig()
    slots = max(config.event_slots, 1)  # (0 turns the stack's gathering off: not measured)
    return await _gathered_builds(dsn, players, rate, seconds, task_servers, slots,
                                  config.event_batch, config.event_gather_ms)  # fmt: skip


async def command_cost(
    dsn: str,
    players: Sequence[SimPlayer],
    rate: float,
    seconds: float,
    web_workers: int,
    gather_ms: int,
) -> tuple[float, float]:
    """(PostgreSQL, client) µs of one hand-written build, the builds gathered into
    set-based statements as ``web_workers`` web processes gather their commands', with
    a ``gather_ms`` window (``WebConfig.command_gather_ms``)."""
    config = WebConfig()
    return await _gathered_builds(dsn, players, rate, seconds, web_workers,
                                  config.command_writers, config.command_batch,
                                  gather_ms)  # fmt: skip


async def _gathered_builds(
    dsn: str,
    players: Sequence[SimPlayer],
    rate: float,
    seconds: float,
    processes: int,
    slots: int,
    max_batch: int,
    gather_ms: int,
) -> tuple[float, float]:
    """(PostgreSQL, client) µs of one hand-written build in a random player's village, the
    builds gathered (``_dealt``) into one set-based statement and commit per batch."""
    bare = BareBuild()
    async with _pool(dsn, {}) as pool:

        async def write_on(conn: asyncpg.Connection, villages: list[int]) -> None:
            await bare.run_many(conn, [(v, os.urandom(8).hex()) for v in villages])

        async def prepare_on(conn: asyncpg.Connection) -> None:
            await write_on(conn, [random.choice(players).village_id])

        write = _dealt(processes, pool, write_on, slots, max_batch, gather_ms)

        async def op() -> None:
            await write(random.choice(players).village_id)

        return await _measured(pool, prepare_on, op, rate, seconds)


async def measure_costs(
    traffic: Traffic,
    *,
    dsn: str,
    game: str,
    players: Sequence[SimPlayer],
    web_workers: int,
    task_servers: int,
    seconds: float,
) -> Costs:
    http = await http_cost(traffic.requests_per_s, seconds, web_workers)
    return await database_costs(traffic, dsn=dsn, game=game, players=players,
                                web_workers=web_workers, task_servers=task_servers,
                                seconds=seconds, http=http,
                                password_hash=password_hash_cost())  # fmt: skip


def probe_rate(rate: float) -> float:
    """The rate a database probe runs ``rate`` operations a second at."""
    return min(rate, MAX_PROBE_RATE)


async def database_costs(
    traffic: Traffic,
    *,
    dsn: str,
    game: str,
    players: Sequence[SimPlayer],
    web_workers: int,
    task_servers: int,
    seconds: float,
    http: float = 0.0,
    password_hash: float = 0.0,
    command_windows: Sequence[int] = (),
) -> Costs:
    """The snapshot reads' and the commands' (gathered as ``web_workers`` processes gather
    them) and the events' (as ``task_servers`` processes gather them) costs at
    ``traffic``'s rates (at most ``MAX_PROBE_RATE``); ``http`` and ``password_hash``: a
    request's and a login's, measured apart. The commands are gathered with the stack's
    window, and priced again with each of ``command_windows``: the cheapest counts."""
    builds = probe_rate(traffic.builds_per_s)
    commands, events = probe_rate(traffic.commands_per_s), probe_rate(traffic.events_per_s)
    build_pg, build_client = await build_cost(dsn, game, players, builds, seconds, web_workers)
    priced = {}
    for window in dict.fromkeys((WebConfig().command_gather_ms, *command_windows)):
        priced[window] = await command_cost(dsn, players, commands, seconds, web_workers, window)
    window = min(priced, key=lambda w: sum(priced[w]))
    command_pg, command_client = priced[window]
    event_pg, event_client = await event_cost(dsn, players, events, seconds, task_servers)
    return Costs(http, build_pg, build_client, command_pg, command_client, event_pg,
                 event_client, password_hash, window)  # fmt: skip


def floor_figures(
    traffic: Traffic, costs: Costs, ours_millicores: Mapping[str, float], cores: int
) -> dict[str, Any]:
    """Millicores per player per tier at the floor, the players ``cores`` hold at it, and
    the stack's servers against it."""
    t, c = traffic, costs
    per_s = {  # CPU µs per second of the step's traffic, per tier
        "web": t.requests_per_s * c.http_server + t.builds_per_s * c.build_client
        + t.commands_per_s * c.command_client + t.logins_per_s * c.password_hash,
        "task_server": t.events_per_s * c.event_client,
        "postgres": _postgres_us_per_s(t, c),
        "redis": 0.0,
    }  # fmt: skip
    millicores = {tier: round(us / 1000 / t.players, 4) for tier, us in per_s.items()}
    floor = sum(millicores.values())
    ours = sum(ours_millicores.get(tier, 0.0) for tier in millicores)
    return {
        "traffic": {k: round(v, 2) for k, v in asdict(traffic).items()},
        "cpu_us_per_operation": costs.per_operation(),
        "millicores_per_player": millicores,
        "players_on_these_cores": int(cores * 1000 / floor) if floor > 0 else None,
        "ours_to_floor": round(ours / floor, 2) if floor > 0 else None,
    }


def target_figures(traffic: Traffic, costs: Costs, cores: int) -> dict[str, Any]:
    """What ``traffic`` (the target's players) asks of bare parts, each kind at its cheapest
    (module docstring): its HTTP requests, its logins' password hashes, and its snapshot
    statements and write transactions on PostgreSQL and their client. Redis, the tick and
    the event streams count as nothing: a lower bound of the cores the target needs."""
    t, c = traffic, costs
    postgres = _postgres_us_per_s(t, c) / 1e6
    clients = (
        t.builds_per_s * c.build_client + t.commands_per_s * c.command_client
        + t.events_per_s * c.event_client
    ) / 1e6  # fmt: skip
    http = t.requests_per_s * c.http_server / 1e6
    hashes = t.logins_per_s * c.password_hash / 1e6
    total = postgres + clients + http + hashes
    return {
        "players": t.players,
        "traffic": {k: round(v, 2) for k, v in asdict(traffic).items()},
        "measured_at_per_s": {
            "builds": round(probe_rate(t.builds_per_s), 1),
            "commands": round(probe_rate(t.commands_per_s), 1),
            "events": round(probe_rate(t.events_per_s), 1),
            "http": "saturation",
            "commands_gathered_ms": c.command_gather_ms,
        },
        "cpu_us_per_operation": costs.per_operation(),
        "postgres_cores": round(postgres, 2),
        "database_cores": round(postgres + clients, 2),
        "http_cores": round(http, 2),
        "password_hash_cores": round(hashes, 2),
        "cores_at_least": round(total, 2),
        "fits_these_cores": total <= cores,
    }


def _postgres_us_per_s(t: Traffic, c: Costs) -> float:
    return (
        t.builds_per_s * c.build_postgres + t.commands_per_s * c.command_postgres
        + t.events_per_s * c.event_postgres
    )  # fmt: skip
