"""Task-server processes: kill -9 mid-batch, several servers sharing partitions, the CLI.

Each server is a real ``python -m gameserver`` process running the test game,
whose handler writes one effect row per event inside the event's transaction.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.settings import Settings
from db.engine import create_engine
from db.models import Village
from gameserver.leases import LeaseManager
from refgame.resources import STOCKS
from tests.conftest import TEST_REDIS_URL
from tests.queue.conftest import ROOT, Servers, counts, eventually, server_env
from tests.queue.testgame import EFFECT

pytestmark = pytest.mark.slow

SHORT_LEASES = ("--partition-lease-ms", "1000", "--claim-lease-ms", "1500")


async def _add_events(
    sessions: async_sessionmaker[AsyncSession],
    queue: EventQueue,
    n: int,
    due: Callable[[int], int],
    payload: dict[str, int],
) -> None:
    for start in range(0, n, 1000):
        async with sessions() as session, session.begin():
            events = await add_durable_events(
                session,
                [
                    NewEvent(EFFECT, i % 97, due(i), dict(payload))
                    for i in range(start, min(n, start + 1000))
                ],
            )
        await queue.index(events)


async def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    code = await asyncio.to_thread(proc.wait, timeout_s)
    if code != 0 and proc.stderr:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    return code


async def test_kill_9_mid_batch_then_restart_runs_every_event_once(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    redis: Redis,
    servers: Servers,
) -> None:
    n = 3000
    settings = settings.model_copy(update={"queue_partitions": 2})
    queue = EventQueue(redis, prefix=settings.redis_prefix, partitions=2, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    await _add_events(sessions, queue, n, lambda i: now - 1_000 + i % 500, {"sleep_ms": 50})
    env = server_env(settings)
    proc = servers.start(env, "--batch-size", "100", *SHORT_LEASES)

    async def a_fifth_done() -> bool:
        return (await counts(sessions))["processed"] >= n // 5

    await eventually(a_fifth_done, 60)
    proc.send_signal(signal.SIGKILL)  # most likely inside a batch's transaction
    proc.wait(10)
    before = await counts(sessions)
    assert before["processed"] < n, "the server finished before it could be killed"
    assert before["effects"] == before["processed"]  # a killed transaction left nothing

    # the rest on its own transactions (no window: what gathers waits for a busy runner)
    again = servers.start(
        env, "--batch-size", "100", "--burst", "--event-gather-ms", "0", *SHORT_LEASES
    )
    assert await _wait_exit(again, 90) == 0
    assert await counts(sessions) == {"processed": n, "effects": n, "distinct": n, "pending": 0}
    stats = await queue.stats()
    assert sum(s.depth + s.inflight + s.dead for s in stats) == 0
    await queue.aclose()


@pytest.mark.parametrize("processes", [2, 3])
async def test_servers_share_partitions_and_take_over_a_killed_one(
    postgres_url: str,
    redis_prefix: str,
    redis: Redis,
    servers: Servers,
    processes: int,
) -> None:
    from db.engine import create_engine, session_factory
    from tests.queue.testgame import reset_effects

    settings = Settings(
        database_url=postgres_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        queue_partitions=6,
    )  # type: ignore[call-arg]
    engine = create_engine(settings)
    await reset_effects(engine)
    sessions = session_factory(engine)
    queue = EventQueue(redis, prefix=redis_prefix, partitions=6, clock=SYSTEM_CLOCK)
    lease = LeaseManager(redis, prefix=redis_prefix, group="queue", count=6)
    n = 1500
    try:
        start = SYSTEM_CLOCK.now_ms() + 1_500
        await _add_events(sessions, queue, n, lambda i: start + (i % 50) * 80, {"sleep_ms": 5})
        env = server_env(settings)
        procs = [servers.start(env, "--batch-size", "50", *SHORT_LEASES) for _ in range(processes)]
        pids = {str(p.pid) for p in procs}

        async def balanced() -> bool:
            owners = await lease.owners()
            holders = {o.split(":")[1] for o in owners.values()}
            return len(owners) == 6 and holders == pids

        await eventually(balanced, 30)
        victim = procs[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        survivors = pids - {str(victim.pid)}

        async def all_ran() -> bool:
            return (await counts(sessions))["processed"] >= n

        await eventually(all_ran, 60)

        async def taken_over() -> bool:
            owners = await lease.owners()
            return len(owners) == 6 and {o.split(":")[1] for o in owners.values()} == survivors

        await eventually(taken_over, 30)

        async def drained() -> bool:  # the victim's claims redelivered and acked: work is over
            stats = await queue.stats()
            return sum(s.depth + s.inflight for s in stats) == 0

        await eventually(drained, 30)
        assert await counts(sessions) == {"processed": n, "effects": n, "distinct": n, "pending": 0}
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        for proc in procs[1:]:
            assert await _wait_exit(proc, 20) == 0
        assert await lease.owners() == {}  # a clean stop hands the partitions back
    finally:
        await queue.aclose()
        await engine.dispose()


def _gameserver(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gameserver", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_and_bad_configuration(sqlite_url: str, redis_prefix: str, tmp_path: Path) -> None:
    base = dict(os.environ)
    base.update(
        PYTHONPATH=str(ROOT),
        REDIS_URL=TEST_REDIS_URL,
        REDIS_PREFIX=redis_prefix,
        DATABASE_URL=sqlite_url,
        GAMESERVER_METRICS_PORT="0",
    )
    ok = _gameserver({**base, "GAME": "tests.queue.testgame"}, "--check")
    assert ok.returncode == 0, ok.stderr
    assert "redis: ok" in ok.stdout and "test.effect" in ok.stdout

    # a game that cannot be loaded stops the process at start with one line
    no_game = _gameserver({**base, "GAME": "no_such_game"}, "--check")
    assert no_game.returncode == 2
    assert no_game.stderr.strip().splitlines() == [
        "gameserver: GAME=no_such_game: cannot import no_such_game.world: no module named "
        "'no_such_game' (put the game's parent directory on PYTHONPATH or install the package)"
    ]

    cases = [
        ({"QUEUE_PARTITIONS": "0"}, 2, "QUEUE_PARTITIONS"),
        ({"REDIS_URL": "redis://127.0.0.1:1/0"}, 3, "REDIS_URL: cannot reach"),
        ({"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/empty.db"}, 4, "has no schema"),
    ]
    for change, code, message in cases:
        result = _gameserver({**base, **change}, "--check")
        assert result.returncode == code, result.stderr
        lines = [line for line in result.stderr.splitlines() if line.startswith("gameserver:")]
        assert len(lines) == 1 and message in lines[0]
        assert "Traceback" not in result.stderr


async def test_sigterm_stops_cleanly_and_hands_partitions_back(
    sqlite_url: str, redis_prefix: str, redis: Redis, servers: Servers
) -> None:
    settings = Settings(
        database_url=sqlite_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        queue_partitions=4,
    )  # type: ignore[call-arg]
    proc = servers.start(server_env(settings), *SHORT_LEASES)
    lease = LeaseManager(redis, prefix=redis_prefix, group="queue", count=4)

    async def holds_all() -> bool:
        return len(await lease.owners()) == 4

    await eventually(holds_all, 30)
    proc.send_signal(signal.SIGTERM)
    assert await _wait_exit(proc, 20) == 0
    assert await lease.owners() == {}


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
async def test_the_scheduler_logs_its_job_runs_only_at_debug(
    sqlite_url: str, redis_prefix: str, redis: Redis, servers: Servers, level: str
) -> None:
    """APScheduler logs two INFO lines per job run, the tick's every second: only DEBUG shows
    them; INFO still shows the task server's own lines."""
    settings = Settings(
        database_url=sqlite_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        queue_partitions=2,
    )  # type: ignore[call-arg]
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:  # one village, ticked every second (one shard)
            await conn.execute(insert(Village).values(id=1, name="v", x=0, y=0, created_ms=0))
            await conn.execute(
                insert(STOCKS.table).values(
                    village_id=1, shard=0, updated_ms=0, wood=0, clay=0, iron=0, crop=0,
                    wood_rate=0, clay_rate=0, iron_rate=0, crop_rate=0, warehouse_cap=0,
                    granary_cap=0,
                )
            )  # fmt: skip
        proc = servers.start(server_env(settings, LOG_LEVEL=level, TICK_SHARDS="1"))
        ticked: list[int] = []

        async def ticked_twice() -> bool:
            async with engine.connect() as conn:
                updated = (await conn.execute(select(STOCKS.c.updated_ms))).scalar_one()
            if updated and updated not in ticked:
                ticked.append(updated)
            return len(ticked) >= 2

        await eventually(ticked_twice, 30)
    finally:
        await engine.dispose()
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 20) == 0
    assert proc.stderr is not None
    log = proc.stderr.read().decode(errors="replace")
    assert "INFO common.node_lease" in log  # the server's own INFO lines are there
    scheduler = [line for line in log.splitlines() if " apscheduler." in line]
    if level == "DEBUG":
        assert any("Running job" in line for line in scheduler)
    else:
        assert not any(" INFO " in line for line in scheduler), scheduler[:3]
