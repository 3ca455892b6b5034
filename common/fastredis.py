"""A lean pipelining Redis client for hot paths: the web tier's requests, and the snapshot
bumps and event indexes after the task server's batches.

redis-py's asyncio client spends more CPU per command than a bare aiohttp
handler takes for a whole request, so with it a snapshot poll could never come
near the ceiling. This client queues each command on one shared connection,
sends everything queued in one loop iteration with a single write (so a burst
of concurrent polls costs one syscall, not one each), and matches replies in
order (RESP is FIFO), parsing with hiredis.

It runs only hot-path commands (``EVALSHA`` of registered scripts, ``GET``, and
the ``SET`` of a built snapshot body); everything else uses redis-py. A lost
connection fails the commands in flight (the API answers 503; the task server logs
it, as any failure after a commit) and the next command reconnects.

With a ``tracker`` (``webfront.localcache.LocalCache``) the connection speaks
RESP3 and turns on client-side caching in broadcast mode for the tracker's key
prefixes: Redis pushes the names of changed keys on this connection, in order
with the replies, and ``on_reply`` callbacks run as their reply is parsed, so a
cache filled by them is invalidated by any later change. A Redis without RESP3
or tracking (older than 6) still works: the tracker just stays inactive.

On Redis Cluster the web tier uses ``ClusterFastRedis`` instead: the same calls
through redis-py's cluster client, which routes each command by its key's slot
and follows redirections and failovers. It turns no client-side caching on (see
its docstring), so sessions and versions are read from Redis on every poll.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import ssl
from collections.abc import Callable
from typing import Any, Protocol

import hiredis
from redis.asyncio.cluster import RedisCluster
from redis.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

_CONNECT_TIMEOUT_S = 5.0
log = logging.getLogger(__name__)

OnReply = Callable[[Any], object]  # its result is ignored


class Tracker(Protocol):
    """What a client-side cache offers the connection (``webfront.localcache.LocalCache``)."""

    def prefixes(self) -> tuple[str, ...]: ...
    def invalidate(self, keys: list[bytes] | None) -> None: ...
    def tracking_started(self) -> None: ...
    def tracking_lost(self) -> None: ...


def _pack(args: tuple[str | bytes | int, ...], head: bytes = b"") -> bytes:
    """RESP of a command; ``head`` is already-encoded leading arguments (counted in the total)."""
    out = [head]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiters: collections.deque[tuple[asyncio.Future[Any], OnReply | None]] = (
            collections.deque()
        )
        self.tracker: Tracker | None = None  # set while client-side caching is being turned on
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.outgoing: list[bytes] = []  # commands of this loop iteration, sent together

    def flush(self) -> None:
        data, self.outgoing = b"".join(self.outgoing), []
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            if type(reply) is hiredis.PushNotification:  # RESP3 push: not a reply
                if self.tracker is not None and len(reply) > 1 and reply[0] == b"invalidate":
                    self.tracker.invalidate(reply[1])
                continue
            waiter, on_reply = self.waiters.popleft()
            if isinstance(reply, hiredis.ReplyError):
                message = str(reply)
                err = NoScriptError if message.startswith("NOSCRIPT") else ResponseError
                if not waiter.done():  # done: its caller was cancelled
                    waiter.set_exception(err(message))
                continue
            if on_reply is not None:  # now, before any later push is read
                try:
                    on_reply(reply)
                except Exception:
                    log.exception("a Redis reply callback failed")
            if not waiter.done():
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.tracker is not None:
            self.tracker.tracking_lost()
        while self.waiters:
            waiter, _ = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(RedisConnectionError(f"connection to Redis lost: {exc}"))


class FastRedis:
    """``await client.execute("GET", key)``; ``await client.evalsha(script, keys, args)``."""

    def __init__(self, url: str, tracker: Tracker | None = None) -> None:
        self._options = parse_url(url)
        self._ssl = url.startswith("rediss://")
        self._protocol: _Protocol | None = None
        self._connecting = asyncio.Lock()
        self._tracker = tracker
        self._scripts: dict[str, Script] = {}

    async def _connect(self) -> _Protocol:
        async with self._connecting:
            if self._protocol is not None and not self._protocol.closed:
                return self._protocol
            loop = asyncio.get_running_loop()
            options = self._options
            async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                try:
                    if "path" in options:
                        _, protocol = await loop.create_unix_connection(_Protocol, options["path"])
                    else:
                        _, protocol = await loop.create_connection(
                            _Protocol,
                            options.get("host", "localhost"),
                            options.get("port", 6379),
                            ssl=ssl.create_default_context() if self._ssl else None,
                        )
                except OSError as exc:
                    raise RedisConnectionError(f"cannot connect to Redis: {exc}") from exc
                try:
                    await self._setup(protocol)
                except BaseException:
                    protocol.transport.close()  # type: ignore[union-attr]
                    raise
            self._protocol = protocol
            return protocol

    async def _setup(self, protocol: _Protocol) -> None:
        """Log in, select the database and, with a tracker, turn client-side caching on."""
        options, tracker = self._options, self._tracker
        password = options.get("password")
        user = options.get("username") or "default"
        if tracker is not None:
            hello: tuple[str | int, ...] = ("HELLO", 3)
            if password:
                hello += ("AUTH", user, password)
            try:
                await self._send(protocol, hello)
                password = None  # HELLO logged in
            except ResponseError as exc:  # no RESP3: serve without the local cache
                log.warning("Redis has no RESP3 (%s): no client-side caching", exc)
                tracker = None
        if password:
            await self._send(protocol, ("AUTH", user, password))
        if options.get("db"):
            await self._send(protocol, ("SELECT", int(options["db"])))
        if tracker is None:
            return
        command: list[str] = ["CLIENT", "TRACKING", "ON", "BCAST"]
        for prefix in tracker.prefixes():
            command += ["PREFIX", prefix]
        protocol.tracker = tracker  # a push may follow the reply in the same read
        try:
            await self._send(protocol, tuple(command))
        except ResponseError as exc:
            protocol.tracker = None
            log.warning("Redis refused client tracking (%s): no client-side caching", exc)
            return
        tracker.tracking_started()

    @staticmethod
    def _send(
        protocol: _Protocol, args: tuple[str | bytes | int, ...], on_reply: OnReply | None = None
    ) -> asyncio.Future[Any]:
        return FastRedis._send_raw(protocol, _pack(args, b"*%d\r\n" % len(args)), on_reply)

    @staticmethod
    def _send_raw(
        protocol: _Protocol, data: bytes, on_reply: OnReply | None = None
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        protocol.waiters.append((future, on_reply))
        if not protocol.outgoing:  # the first command of this iteration schedules the send
            loop.call_soon(protocol.flush)
        protocol.outgoing.append(data)
        return future

    async def execute(self, *args: str | bytes | int, on_reply: OnReply | None = None) -> Any:
        """Run one command; ``on_reply(reply)`` runs as the reply is parsed (not on errors)."""
        protocol = self._protocol
        if protocol is None or protocol.closed:
            protocol = await self._connect()
        return await self._send(protocol, args, on_reply)

    async def evalsha(
        self,
        script: Script,
        keys: tuple[str, ...],
        args: tuple[str | bytes | int, ...],
        on_reply: OnReply | None = None,
    ) -> Any:
        protocol = self._protocol
        if protocol is None or protocol.closed:
            protocol = await self._connect()
        params = (*keys, *args)
        head = script.head(len(keys), len(params))
        try:
            return await self._send_raw(protocol, _pack(params, head), on_reply)
        except NoScriptError:  # a restarted or flushed Redis: EVAL loads it again
            return await self.execute(
                "EVAL", script.source, len(keys), *keys, *args, on_reply=on_reply
            )

    async def eval_script(
        self, source: str, keys: tuple[str, ...], args: tuple[str | bytes | int, ...]
    ) -> Any:
        """EVALSHA of ``source`` (its ``Script`` made once and kept)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = Script(source)
        return await self.evalsha(script, keys, args)

    async def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None


class Script:
    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self._heads: dict[tuple[int, int], bytes] = {}

    def head(self, n_keys: int, n_params: int) -> bytes:
        """The encoded ``EVALSHA sha numkeys`` start of a call with ``n_params`` keys and args."""
        head = self._heads.get((n_keys, n_params))
        if head is None:
            start = ("EVALSHA", self.sha, n_keys)
            head = _pack(start, b"*%d\r\n" % (len(start) + n_params))
            self._heads[n_keys, n_params] = head
        return head


class ClusterFastRedis(FastRedis):
    """``FastRedis``'s calls on Redis Cluster, through redis-py's cluster client.

    The lean connection speaks to one server; on a cluster each key lives on the
    node of its slot, and slots move. Routing, ``MOVED``/``ASK`` and failover are
    what the cluster client already does well, so the hot path uses it here and
    pays its CPU per command.

    No client-side caching: ``CLIENT TRACKING`` is per connection and per node, so
    keeping the local cache true would need a tracking connection to every
    master, re-made whenever slots move, and each loss would have to forget
    everything. Until that is worth its complexity, the tracker stays inactive
    (every poll reads its session and version from Redis, as fresh as before);
    snapshot bodies are still remembered, as they are immutable per version.
    """

    def __init__(self, cluster: RedisCluster) -> None:  # no super().__init__: no own socket
        self._cluster = cluster

    async def execute(self, *args: str | bytes | int, on_reply: OnReply | None = None) -> Any:
        reply = await self._cluster.execute_command(*args)
        _run(on_reply, reply)
        return reply

    async def evalsha(
        self,
        script: Script,
        keys: tuple[str, ...],
        args: tuple[str | bytes | int, ...],
        on_reply: OnReply | None = None,
    ) -> Any:
        try:
            reply = await self._cluster.evalsha(script.sha, len(keys), *keys, *args)  # type: ignore[misc]
        except NoScriptError:  # a node that never saw it (new, restarted, failed over)
            reply = await self._cluster.eval(script.source, len(keys), *keys, *args)  # type: ignore[misc]
        _run(on_reply, reply)
        return reply

    async def close(self) -> None:
        """Nothing of its own to close: the cluster client belongs to the app."""


def _run(on_reply: OnReply | None, reply: Any) -> None:
    if on_reply is not None:
        try:
            on_reply(reply)
        except Exception:
            log.exception("a Redis reply callback failed")
