"""Hostile queue entries against a real task-server process (SECURITY.md, "Queue input").

``tests/queue/test_retry.py`` covers a garbage body and a wrong body shape with an
in-process worker. Here a real ``gameserver`` process running the reference game
gets what is missing: oversized blobs (2 MiB of noise, a 1 MiB payload), entries
shorter than a member or with a non-hex member, a header naming another event,
real kinds with payloads their handler chokes on, a durable entry with no DB
row, junk in the by-id index and on the wake-up channel. Each must end in the
dead-letter set with a reason (or, for the durable one, change nothing), and the
process must keep running the events that come after.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from sqlalchemy import select

from chaos.faults import _garbage_entries
from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue, NewEvent, codec
from common.queue.constants import HEADER_LEN, MEMBER_LEN, PartitionKeys
from common.settings import load_settings
from db.engine import create_engine
from db.models import ProcessedEvent
from tests.conftest import TEST_REDIS_URL
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2


@pytest.fixture
def task_server(
    sqlite_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "DATABASE_URL": sqlite_url,
        "REDIS_URL": TEST_REDIS_URL,
        "REDIS_PREFIX": redis_prefix,
        "QUEUE_PARTITIONS": str(PARTITIONS),
        "GAMESERVER_METRICS_PORT": "0",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    log = (tmp_path / "gameserver.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gameserver"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    log.close()


def _ran(sqlite_url: str, ids: list[int]):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        engine = create_engine(load_settings(database_url=sqlite_url, redis_url=TEST_REDIS_URL))
        try:
            async with engine.connect() as conn:
                found = await conn.execute(
                    select(ProcessedEvent.event_id).where(ProcessedEvent.event_id.in_(ids))
                )
                return len(found.all()) == len(ids)
        finally:
            await engine.dispose()

    return check


async def _good_events(queue: EventQueue, due_ms: int) -> list[int]:
    """In every partition, events of a real kind due with the garbage (same batch): news of
    losses for villages that do not exist, which the handler records and ignores."""
    return [
        await queue.schedule(NewEvent("troops_lost", 1000 + p, due_ms, {"lost": {"imperian": 1}}))
        for p in range(PARTITIONS)
    ]


async def _inject(redis: Redis, prefix: str, known_bugs: bool) -> list[tuple]:  # type: ignore[type-arg]
    now = SYSTEM_CLOCK.now_ms()
    entries = _garbage_entries(random.Random(5), PARTITIONS, now - 5, 1, known_bugs)
    for _, partition, blob, _, _ in entries:
        await redis.zadd(PartitionKeys(prefix, partition).due, {blob: now - 5})
    return entries


async def test_malformed_and_oversized_entries_go_to_dead_letters_and_work_goes_on(
    task_server: subprocess.Popen[bytes], redis: Redis, redis_prefix: str, sqlite_url: str
) -> None:
    queue = EventQueue(redis, prefix=redis_prefix, partitions=PARTITIONS, clock=SYSTEM_CLOCK)
    entries = await _inject(redis, redis_prefix, known_bugs=True)
    keys = PartitionKeys(redis_prefix, 0)
    await redis.hset(keys.byid, b"%016x" % (1 << 61), b"\x00junk in the id index")
    await redis.publish(keys.channel, b"junk,\xff:1,3:not-a-time,0:0")
    good = await _good_events(queue, SYSTEM_CLOCK.now_ms() - 5)
    expected_dead = sum(1 for e in entries if e[3] == "dead")

    async def all_dead() -> bool:  # the bad-payload ones die after their retries (~15 s)
        return len(await queue.dead()) >= expected_dead

    await wait_for(_ran(sqlite_url, good), "the good event to run", 30)
    await wait_for(all_dead, "every bad entry dead-lettered", 60)
    dead = await queue.dead()
    dead_members = {(d.partition, bytes(d.member)) for d in dead}
    for name, partition, blob, expect, _ in entries:
        assert await redis.zscore(PartitionKeys(redis_prefix, partition).due, blob) is None, name
        if expect == "dead":
            assert (partition, blob[:MEMBER_LEN]) in dead_members, name
    assert len(dead) == expected_dead and all(d.error for d in dead)
    reasons = " | ".join(d.error for d in dead)
    assert "unknown event kind" in reasons and "undecodable" in reasons
    assert task_server.poll() is None, "the task server died"
    stats = await queue.stats()
    assert sum(s.ready + s.inflight for s in stats) == 0
    await queue.aclose()


async def test_an_entry_with_a_broken_header_takes_no_other_event_with_it(
    task_server: subprocess.Popen[bytes], redis: Redis, redis_prefix: str, sqlite_url: str
) -> None:
    queue = EventQueue(redis, prefix=redis_prefix, partitions=PARTITIONS, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    for p in range(PARTITIONS):
        await redis.zadd(PartitionKeys(redis_prefix, p).due, {b"short!%d" % p: now - 10})
    good = await _good_events(queue, now - 5)
    try:
        await wait_for(_ran(sqlite_url, good), "the good event to run", 15)
    finally:
        await queue.aclose()


async def test_an_entry_whose_header_names_another_event_is_dead_lettered(
    task_server: subprocess.Popen[bytes], redis: Redis, redis_prefix: str, sqlite_url: str
) -> None:
    queue = EventQueue(redis, prefix=redis_prefix, partitions=PARTITIONS, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    head = codec.encode((1 << 62) + 1, "troops_lost", 0, now, 0, {"lost": {}}, 0, False)
    body = codec.encode((1 << 62) + 2, "troops_lost", 0, now, 0, {"lost": {}}, 0, False)
    await redis.zadd(
        PartitionKeys(redis_prefix, 0).due, {head[:HEADER_LEN] + body[HEADER_LEN:]: now - 5}
    )

    async def dead() -> bool:
        return len(await queue.dead()) == 1

    try:
        await wait_for(dead, "the bad entry dead-lettered", 15)
    finally:
        await queue.aclose()


async def test_an_entry_scored_infinite_does_not_stop_its_partition(
    task_server: subprocess.Popen[bytes], redis: Redis, redis_prefix: str, sqlite_url: str
) -> None:
    queue = EventQueue(redis, prefix=redis_prefix, partitions=PARTITIONS, clock=SYSTEM_CLOCK)
    now = SYSTEM_CLOCK.now_ms()
    never = codec.encode((1 << 62) + 99, "troops_lost", 0, now, 0, {"lost": {}}, 0, False)
    await redis.zadd(PartitionKeys(redis_prefix, 0).due, {never: float("inf")})
    good = await queue.schedule(NewEvent("troops_lost", 2, now, {"lost": {"legionnaire": 1}}))
    engine = create_engine(load_settings(database_url=sqlite_url, redis_url=TEST_REDIS_URL))

    async def good_ran() -> bool:
        async with engine.connect() as conn:
            found = await conn.execute(
                select(ProcessedEvent.event_id).where(ProcessedEvent.event_id == good)
            )
            return found.first() is not None

    try:
        await wait_for(good_ran, "the good event to run", 20)
    finally:
        await engine.dispose()
        await queue.aclose()
