"""A node id of ``common.ids`` leased in Redis, so no two live processes of a world share one.

Two processes with the same node make the same ids in the same millisecond:
a ``scheduled_events`` primary key taken twice fails a command or a batch.
With 1,024 nodes drawn at random, two processes of a world share one with
odds of about n²/2048 (1 in 20 for ten processes). So each web and task
server leases a node when it starts, keeps the lease while it runs and hands
it back when it stops.

Keys of world ``wg``: ``wg:{ids}:nodes`` (sorted set node -> lease expiry ms,
Redis server clock) and ``wg:{ids}:owners`` (hash node -> owner). One script
per step (``node_acquire.lua``, ``node_renew.lua``, ``node_release.lua``).

Where no lease can be had (Redis unreachable, every node leased) the process
keeps its random node, says so in a warning, and tries again at each renewal.
A process that cannot renew for longer than the TTL keeps its node (its ids
must keep increasing); at its next renewal it moves to another node if a new
process took that one meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from common import ids
from common.redis_conn import AnyRedis

log = logging.getLogger(__name__)

NODE_LEASE_TTL_MS = 60_000  # a dead process's node is free again after this
NODE_RENEW_MS = 10_000  # a live process renews its lease this often
NODE_COOLDOWN_MS = 1_000  # a handed-back node is not leased again for this long
ACQUIRE_TIMEOUT_S = 5.0  # a start does not wait longer than this for Redis

_HERE = Path(__file__).parent
_ACQUIRE = (_HERE / "node_acquire.lua").read_text()
_RENEW = (_HERE / "node_renew.lua").read_text()
_RELEASE = (_HERE / "node_release.lua").read_text()


_active: list[NodeLease] = []  # leases of this process, latest last (one per world)


def _why(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def node_keys(prefix: str) -> tuple[str, str]:
    """(expiries, owners): the keys of a world's node leases (one hash tag: one slot)."""
    return f"{prefix}:{{ids}}:nodes", f"{prefix}:{{ids}}:owners"


class NodeLease:
    """Leases a node for this process (``acquire``), renews it (``run``) until ``stop()``,
    and hands it back (``release``). The leased node becomes ``common.ids``'s process node."""

    def __init__(
        self,
        redis: AnyRedis,
        prefix: str,
        *,
        ttl_ms: int = NODE_LEASE_TTL_MS,
        renew_ms: int = NODE_RENEW_MS,
        owner: str | None = None,
        count: int = ids.NODE_COUNT,
    ) -> None:
        if renew_ms * 2 > ttl_ms:
            raise ValueError("ttl_ms must cover at least two renewals")
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        self.renew_ms = renew_ms
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.count = count
        self.node: int | None = None  # None: no lease (the process node is a random one)
        self._keys = node_keys(prefix)
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        self._stop = asyncio.Event()

    async def _call(self, script: Any, *args: Any) -> int:
        async with asyncio.timeout(ACQUIRE_TIMEOUT_S):
            return int(await script(keys=self._keys, args=args))

    async def acquire(self) -> int | None:
        """Lease a node and make it the process node; None (with a warning) if none could be
        had: the process keeps its random node."""
        try:
            # a random start, not a counter: after Redis lost the leases (a restart, FLUSHALL)
            # a starting process seldom picks a node that a live one still uses
            start = secrets.randbelow(self.count)
            node = await self._call(self._acquire, self.owner, self.ttl_ms, self.count, start)
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning(
                "%s: could not lease an id node (%s); using the random node %d until one is "
                "leased: ids may collide with another process's",
                self.prefix, _why(exc), ids.process_node(),
            )  # fmt: skip
            return None
        if node < 0:
            log.warning(
                "%s: all %d id nodes are leased by live processes; using the random node %d: "
                "ids may collide with another process's",
                self.prefix, self.count, ids.process_node(),
            )  # fmt: skip
            return None
        self.node = node
        if self in _active:
            _active.remove(self)
        _active.append(self)
        ids.set_process_node(node)
        log.info("%s: id node %d leased", self.prefix, node)
        return node

    async def renew(self) -> bool:
        """Extend the lease; lease another node if a live process holds ours. True: leased."""
        if self.node is None:
            return await self.acquire() is not None
        try:
            kept = await self._call(self._renew, self.owner, self.ttl_ms, self.node)
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning("%s: renewing the lease of id node %d failed: %s", self.prefix, self.node,
                        _why(exc))  # fmt: skip
            return False
        if kept:
            return True
        log.warning(
            "%s: id node %d was leased by another process (ours had expired); moving on",
            self.prefix, self.node,
        )  # fmt: skip
        self.node = None
        if self in _active:
            _active.remove(self)
        return await self.acquire() is not None

    async def run(self) -> None:
        """Renew every ``renew_ms`` until ``stop()``."""
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.renew_ms / 1000):
                    await self._stop.wait()
            if not self._stop.is_set():
                await self.renew()

    def stop(self) -> None:
        self._stop.set()

    async def release(self) -> None:
        """Hand the node back (after a short cooldown it can be leased again)."""
        node, self.node = self.node, None
        if self in _active:
            _active.remove(self)
        if node is None:
            return
        if _active and ids.process_node() == node:
            # a process serving several worlds (tests): go on with another world's node
            ids.set_process_node(_active[-1].node)  # type: ignore[arg-type]
        try:
            await self._call(self._release, self.owner, node, NODE_COOLDOWN_MS)
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning("%s: could not hand back id node %d (%s); it expires on its own",
                        self.prefix, node, _why(exc))  # fmt: skip
