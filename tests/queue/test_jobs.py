"""One-per-world periodic jobs: two task-server processes run a game's job once per interval
between them; kill the holder and the other takes the job over."""

from __future__ import annotations

import itertools
import signal

import pytest
from redis.asyncio import Redis

from common.settings import Settings
from tests.queue.conftest import Servers, eventually, server_env
from tests.queue.testgame.handlers import TALLY_EVERY_S, tally_key

pytestmark = pytest.mark.slow
INTERVAL_MS = int(TALLY_EVERY_S * 1000)


async def _runs(redis: Redis, prefix: str) -> list[tuple[int, int]]:
    """(pid, Redis ms) of every run of the test game's job so far."""
    rows: list[bytes] = await redis.lrange(tally_key(prefix), 0, -1)  # type: ignore[misc,assignment]
    return [(int(p), int(ms)) for p, ms in (row.split(b":") for row in rows)]


def _once_per_interval(runs: list[tuple[int, int]]) -> None:
    starts = [ms for _, ms in runs]
    assert starts == sorted(starts)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # the gate lets a run start an interval after the last one started, never sooner (the
    # job reads Redis TIME a moment after the gate did: a few ms of slack)
    assert all(gap >= INTERVAL_MS - 50 for gap in gaps), gaps


async def test_a_job_runs_once_per_world_and_moves_when_its_holder_dies(
    settings: Settings, redis: Redis, servers: Servers
) -> None:
    env = server_env(settings, TICK_SHARDS="2")
    procs = {p.pid: p for p in (servers.start(env, "--no-tick"), servers.start(env, "--no-tick"))}

    async def settled() -> bool:
        # the job may move once when the second server joins (fair share); then it stays
        runs = await _runs(redis, settings.redis_prefix)
        return len(runs) >= 3 and len({pid for pid, _ in runs[-3:]}) == 1

    await eventually(settled, 60)
    before = await _runs(redis, settings.redis_prefix)
    _once_per_interval(before)  # however it moved, never twice in an interval
    holder = before[-1][0]
    assert holder in procs
    procs[holder].send_signal(signal.SIGKILL)
    procs[holder].wait(10)
    killed_at = len(before)

    async def taken_over() -> bool:
        runs = await _runs(redis, settings.redis_prefix)
        return len({pid for pid, _ in runs[killed_at:]} - {holder}) == 1 and len(runs) >= (
            killed_at + 3
        )

    await eventually(taken_over, 60)
    after = await _runs(redis, settings.redis_prefix)
    _once_per_interval(after)
    [survivor] = {pid for pid, _ in after[killed_at:]} - {holder}
    assert procs[survivor].poll() is None
