"""Leased ownership of N numbered items (queue partitions, tick shards) across processes.

Each process heartbeats a group: it stays a live member, renews the items it
owns and takes free ones up to its fair share (``count / live members``,
members ordered by name). A process above its share hands items back, but
only after ``before_release`` has stopped the work on them, so an item is
never worked by two processes on purpose. A dead process's items expire
after ``ttl_ms`` and are taken by the survivors at their next heartbeat.

All keys of a group share one hash tag (one Redis Cluster slot) and every
step is one Lua script using the Redis server's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from redis.exceptions import RedisError

from common.queue.scripts import load_script
from common.redis_conn import AnyRedis

log = logging.getLogger(__name__)

_HEARTBEAT = load_script("lease_heartbeat.lua", Path(__file__).parent)
_RELEASE = load_script("lease_release.lua", Path(__file__).parent)


def default_owner() -> str:
    """host:pid:random, unique per process start."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class LeaseManager:
    """Holds a fair share of ``count`` items of ``group`` while ``run`` heartbeats.

    ``on_change(held)`` is awaited after every heartbeat with the items this
    process owns and keeps (start work for new ones, stop work for missing
    ones). ``before_release(item)`` is awaited before an item is handed back.
    ``greedy=True`` takes every free item without joining the group (a
    one-off burst run).
    """

    def __init__(
        self,
        redis: AnyRedis,
        *,
        prefix: str,
        group: str,
        count: int,
        ttl_ms: int = 5_000,
        heartbeat_ms: int = 1_000,
        owner: str | None = None,
        greedy: bool = False,
        on_change: Callable[[frozenset[int]], Awaitable[None]] | None = None,
        before_release: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        if count < 1:
            raise ValueError("count must be >= 1")
        if heartbeat_ms * 2 > ttl_ms:
            raise ValueError("ttl_ms must cover at least two heartbeats")
        self.redis = redis
        self.group = group
        self.count = count
        self.ttl_ms = ttl_ms
        self.heartbeat_ms = heartbeat_ms
        self.owner = owner or default_owner()
        self.greedy = greedy
        self.on_change = on_change
        self.before_release = before_release
        tag = f"{prefix}:{{lease:{group}}}"
        self._keys = (f"{tag}:members", f"{tag}:owners", f"{tag}:expiries")
        self.held: frozenset[int] = frozenset()
        self.share = 0
        self._releasing: dict[int, asyncio.Task[None]] = {}
        self._valid_until = 0.0  # time.monotonic() until which our leases surely hold
        self._stop = asyncio.Event()

    def valid(self) -> bool:
        """True while the last successful heartbeat still covers our leases."""
        return time.monotonic() < self._valid_until

    async def heartbeat(self) -> frozenset[int]:
        """Renew, rebalance and return the items held (those being released excluded)."""
        sent = time.monotonic()
        reply = await _HEARTBEAT(
            self.redis,
            self._keys,
            (self.owner, self.ttl_ms, self.count, b"1" if self.greedy else b"0"),
        )
        self._valid_until = sent + self.ttl_ms / 1000
        self.share = int(reply[0])
        owned = {int(i) for i in reply[2:]}
        for item in list(self._releasing):
            if item not in owned:  # released, or lost before we could: nothing left to do
                self._releasing.pop(item).cancel()
        keep = owned - set(self._releasing)
        excess = len(owned) - self.share
        if excess > 0 and not self._releasing:
            for item in sorted(keep, reverse=True)[:excess]:
                self._releasing[item] = asyncio.create_task(self._release(item))
                keep.discard(item)
        self.held = frozenset(keep)
        if self.on_change is not None:
            await self.on_change(self.held)
        return self.held

    async def _release(self, item: int) -> None:
        try:
            if self.before_release is not None:
                await self.before_release(item)
            await _RELEASE(self.redis, self._keys, (self.owner, b"0", item))
        except RedisError:
            log.warning("%s: could not release item %d; it expires on its own", self.group, item)
        finally:
            self._releasing.pop(item, None)

    async def run(self) -> None:
        """Heartbeat every ``heartbeat_ms`` until ``stop()``; Redis errors are retried."""
        while not self._stop.is_set():
            try:
                await self.heartbeat()
            except (RedisError, OSError) as exc:
                log.warning("%s lease heartbeat failed: %s", self.group, exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat_ms / 1000):
                    await self._stop.wait()

    def stop(self) -> None:
        self._stop.set()

    async def release_all(self) -> None:
        """Leave the group and hand back every item at once (after the work on them stopped)."""
        for task in self._releasing.values():
            task.cancel()
        self._releasing.clear()
        items = sorted(self.held)
        self.held = frozenset()
        self._valid_until = 0.0
        try:
            await _RELEASE(self.redis, self._keys, (self.owner, b"1", *items))
        except (RedisError, OSError) as exc:
            log.warning(
                "%s: could not release leases (%s); they expire on their own", self.group, exc
            )

    async def owners(self) -> dict[int, str]:
        """Current owner of each item whose lease has not expired (for status and tests)."""
        owners = await self.redis.hgetall(self._keys[1])  # type: ignore[misc]
        expiries = await self.redis.hgetall(self._keys[2])  # type: ignore[misc]
        now_ms = time.time() * 1000
        return {
            int(item): owner.decode() if isinstance(owner, bytes) else str(owner)
            for item, owner in owners.items()
            if float(expiries.get(item, 0)) > now_ms
        }
