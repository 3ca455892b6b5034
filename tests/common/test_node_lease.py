"""Id nodes leased in Redis: no two live processes of a world make ids with the same node."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

from common import ids
from common.clock import ManualClock
from common.ids import IdGenerator
from common.node_lease import NodeLease, node_keys
from tests.conftest import TEST_REDIS_URL

ROOT = Path(__file__).resolve().parents[2]


async def test_many_processes_starting_at_once_get_distinct_nodes(
    redis: Redis, redis_prefix: str
) -> None:
    clients = [Redis.from_url(TEST_REDIS_URL) for _ in range(100)]  # a connection each
    try:
        leases = [NodeLease(c, redis_prefix, owner=f"p{i}") for i, c in enumerate(clients)]
        nodes = await asyncio.gather(*(lease.acquire() for lease in leases))
        assert None not in nodes and len(set(nodes)) == 100
        assert ids.process_node() in nodes
        owners = await redis.hgetall(node_keys(redis_prefix)[1])  # type: ignore[misc]
        leased = zip(nodes, leases, strict=True)
        assert owners == {str(n).encode(): lease.owner.encode() for n, lease in leased}
        for lease in leases:
            await lease.release()
    finally:
        for c in clients:
            await c.aclose()


async def test_every_node_leased_keeps_a_random_one_and_says_so(
    redis: Redis, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    leases = [NodeLease(redis, redis_prefix, owner=f"p{i}", count=4) for i in range(4)]
    assert {await lease.acquire() for lease in leases} == {0, 1, 2, 3}
    late = NodeLease(redis, redis_prefix, owner="late", count=4)
    with caplog.at_level(logging.WARNING, logger="common.node_lease"):
        assert await late.acquire() is None
    assert "all 4 id nodes are leased" in caplog.text
    # a handed-back node cools down first (ids may run a few ms ahead of the clock) ...
    await leases[2].release()
    assert await late.renew() is False
    await redis.zadd(node_keys(redis_prefix)[0], {b"2": 0})  # ... then it is free
    assert await late.renew() is True and late.node == 2
    assert ids.process_node() == 2


async def test_no_redis_keeps_a_random_node_and_says_so(
    redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    nowhere = Redis.from_url("redis://127.0.0.1:1/0")
    try:
        with caplog.at_level(logging.WARNING, logger="common.node_lease"):
            assert await NodeLease(nowhere, redis_prefix).acquire() is None
    finally:
        await nowhere.aclose()
    assert "could not lease an id node" in caplog.text and "ids may collide" in caplog.text


async def test_a_node_another_process_took_is_given_up_for_a_free_one(
    redis: Redis, redis_prefix: str
) -> None:
    lease = NodeLease(redis, redis_prefix, owner="me")
    node = await lease.acquire()
    assert node is not None and await lease.renew() is True
    # our lease lapsed (a long pause) and a new process took the node meanwhile
    expiries, owners = node_keys(redis_prefix)
    await redis.hset(owners, str(node), "other")
    assert await lease.renew() is True
    assert lease.node is not None and lease.node != node and ids.process_node() == lease.node
    # Redis lost every lease (FLUSHALL): renewing takes ours back
    await redis.delete(expiries, owners)
    assert await lease.renew() is True
    assert await redis.hget(owners, str(lease.node)) == b"me"
    await lease.release()


def test_ids_keep_increasing_when_the_process_node_changes() -> None:
    clock = ManualClock(1_800_000_000_000)
    gen = IdGenerator(clock)
    other = IdGenerator(clock)  # same process: same node and sequence, never the same id
    ids.set_process_node(1000)
    first = gen.next_ids(10) + other.next_ids(10)
    ids.set_process_node(3)  # a lower node in the same ms
    after = gen.next_ids(10) + other.next_ids(10)
    made = first + after
    assert made == sorted(made) and len(set(made)) == 40
    assert {(i >> 12) & 1023 for i in after} == {3}
    assert IdGenerator(clock, node=5).node == 5  # a fixed node stays out of it
    with pytest.raises(ValueError):
        IdGenerator(clock, node=1024)


_PROCESS = """
import asyncio, secrets, sys
secrets.randbelow = lambda n: 7  # every process draws the same "random" node
from redis.asyncio import Redis
from common import ids
from common.node_lease import NodeLease

async def main() -> None:
    redis = Redis.from_url(sys.argv[1])
    lease = NodeLease(redis, sys.argv[2])
    await lease.acquire()
    gen = ids.IdGenerator()
    print("ready", flush=True)
    sys.stdin.readline()  # go: both processes make ids at the same time
    made = [gen.next_ids(50) for _ in range(2000)]
    await lease.release()
    await redis.aclose()
    print(" ".join(str(i) for chunk in made for i in chunk))

asyncio.run(main())
"""


@pytest.mark.slow
def test_ids_of_two_processes_never_collide(redis_prefix: str) -> None:
    """Two processes whose random node draws agree (1 in 1,024 a pair) made the same ids in
    the same ms; with leased nodes they cannot."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS, TEST_REDIS_URL, redis_prefix],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        made = [set(map(int, p.communicate(timeout=60)[0].split())) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs)
    assert all(len(m) == 100_000 for m in made)
    nodes = [{(i >> 12) & 1023 for i in m} for m in made]
    assert nodes[0] != nodes[1] and len(nodes[0]) == len(nodes[1]) == 1
    created = [{i >> 22 for i in m} for m in made]
    assert created[0] & created[1], "the processes made their ids in the same ms"
    assert not made[0] & made[1]
