"""Partition leases: fair shares, hand-over only after the work stopped, takeover after death."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from gameserver.leases import LeaseManager
from tests.queue.conftest import eventually

COUNT = 16


class Owner:
    def __init__(self, redis: Redis, prefix: str, name: str, **kwargs: object) -> None:
        self.released: list[int] = []
        self.lease = LeaseManager(
            redis,
            prefix=prefix,
            group="test",
            count=COUNT,
            ttl_ms=600,
            heartbeat_ms=100,
            owner=name,
            before_release=self._before_release,
            **kwargs,  # type: ignore[arg-type]
        )

    async def _before_release(self, item: int) -> None:
        await asyncio.sleep(0.01)  # stopping the work on it takes a moment
        self.released.append(item)


@pytest.fixture
async def owners(redis: Redis, redis_prefix: str) -> AsyncIterator[Callable[..., Owner]]:
    made: list[Owner] = []

    def make(name: str, **kwargs: object) -> Owner:
        owner = Owner(redis, redis_prefix, name, **kwargs)
        made.append(owner)
        return owner

    yield make
    for owner in made:
        await owner.lease.release_all()


async def _beat_until(owners: list[Owner], shares: list[int]) -> None:
    async def balanced() -> bool:
        for o in owners:
            await o.lease.heartbeat()
        await asyncio.sleep(0.02)
        return [len(o.lease.held) for o in owners] == shares

    await eventually(balanced, 10)
    held = [o.lease.held for o in owners]
    assert sum(len(h) for h in held) == len(frozenset().union(*held)) == COUNT  # disjoint, all


async def test_shares_balance_and_hand_over_after_the_work_stopped(
    owners: Callable[..., Owner],
) -> None:
    a = owners("a")
    assert await a.lease.heartbeat() == frozenset(range(COUNT))
    b = owners("b")
    assert await b.lease.heartbeat() == frozenset()  # nothing free yet
    await a.lease.heartbeat()  # a is above its share of 8: it starts handing 8 back
    assert len(a.lease.held) == 8
    await _beat_until([a, b], [8, 8])
    assert sorted(a.released) == list(range(8, 16))  # each one stopped before release
    c = owners("c")
    await _beat_until([a, b, c], [6, 5, 5])
    assert a.lease.valid() and c.lease.valid()


async def test_a_dead_owners_items_are_taken_over(owners: Callable[..., Owner]) -> None:
    a, b, c = owners("a"), owners("b"), owners("c")
    await _beat_until([a, b, c], [6, 5, 5])
    dead_items = a.lease.held
    # a stops heartbeating without releasing (kill -9): its items expire after the TTL
    await _beat_until([b, c], [8, 8])
    assert dead_items <= b.lease.held | c.lease.held
    assert await c.lease.owners() == {
        **{i: "b" for i in b.lease.held},
        **{i: "c" for i in c.lease.held},
    }
    # a graceful stop hands everything over at once
    await b.lease.release_all()
    assert await c.lease.heartbeat() == frozenset(range(COUNT))


async def test_greedy_takes_every_free_item_without_joining(owners: Callable[..., Owner]) -> None:
    a = owners("a")
    await a.lease.heartbeat()
    await a.lease.release_all()
    burst = owners("burst", greedy=True)
    assert await burst.lease.heartbeat() == frozenset(range(COUNT))
    b = owners("b")
    await b.lease.heartbeat()
    assert b.lease.share == COUNT  # the burst run does not count as a member
    assert b.lease.held == frozenset()


async def test_run_loop_heartbeats_until_stopped(owners: Callable[..., Owner]) -> None:
    changes: list[frozenset[int]] = []

    async def on_change(held: frozenset[int]) -> None:
        changes.append(held)

    a = owners("a", on_change=on_change)
    task = asyncio.create_task(a.lease.run())

    async def beats() -> bool:
        return len(changes) >= 3

    await eventually(beats)
    a.lease.stop()
    await asyncio.wait_for(task, 5)
    assert changes[-1] == frozenset(range(COUNT))
