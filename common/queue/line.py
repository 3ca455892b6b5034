"""Raw request lines for the queue's hot paths (a single Redis server, not Cluster).

redis-py packs commands in Python, needs several event-loop turns before a
request reaches the socket, and spends ~12 us per reply read. A ``Line`` is
a connection of its own with a hiredis reader: requests are packed in C and
written at once, replies are parsed in C and read later, in order. A worker
sends its next claim before it runs the current batch, so Redis and Python
work at the same time; ``schedule_many`` streams thousands of events as a
few packed commands.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, cast

import hiredis
from redis.asyncio import Redis
from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

# packs one command (a tuple of str, bytes, int, float) into RESP, in C
pack_command = cast(Callable[[tuple[Any, ...]], bytes], hiredis.pack_command)

READ_TIMEOUT_S = 30.0  # a reply slower than this means the server is gone
_READ_SIZE = 1 << 16


def supports(redis: object) -> bool:
    """Lines speak plain TCP or Unix-socket RESP2 to one server (no Cluster, no TLS)."""
    if not isinstance(redis, Redis):
        return False
    cls = redis.connection_pool.connection_class
    return cls in (Connection, UnixDomainSocketConnection)


def _error(reply: hiredis.ReplyError) -> ResponseError:
    text = str(reply)
    if text.startswith("NOSCRIPT"):
        return NoScriptError(text)
    return ResponseError(text)


class Line:
    """One connection, requests written at once, replies read in order."""

    def __init__(self, redis: Redis) -> None:
        self._params = dict(redis.connection_pool.connection_kwargs)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._parser = hiredis.Reader()
        self.pending = 0  # replies sent for and not read yet

    async def _connect(self) -> None:
        p = self._params
        if p.get("path"):
            reader, writer = await asyncio.open_unix_connection(p["path"])
        else:
            reader, writer = await asyncio.open_connection(
                p.get("host", "localhost"), p.get("port", 6379)
            )
        self._reader, self._writer = reader, writer
        self._parser = hiredis.Reader()
        handshake = []
        if p.get("password"):
            auth = ("AUTH", p["username"], p["password"]) if p.get("username") else None
            handshake.append(pack_command(auth or ("AUTH", p["password"])))
        if p.get("db"):
            handshake.append(pack_command(("SELECT", p["db"])))
        if handshake:
            self.pending = len(handshake)
            writer.write(b"".join(handshake))
            while self.pending:
                await self.read()

    async def send(self, packed: bytes, replies: int = 1) -> None:
        """Write packed commands; ``replies`` is how many replies they produce."""
        try:
            if self._writer is None:
                await self._connect()
            assert self._writer is not None
            self._writer.write(packed)
            if self._writer.transport.get_write_buffer_size() > _READ_SIZE * 4:
                await self._writer.drain()
        except BaseException as exc:
            await self.close()
            if isinstance(exc, OSError):
                raise RedisConnectionError(f"queue line: {exc}") from exc
            raise
        self.pending += replies

    async def read(self) -> Any:
        """The next reply; an error reply raises its ResponseError (the line stays usable)."""
        if self._reader is None or self.pending <= 0:
            raise RuntimeError("no reply is pending on this line")
        parser = self._parser
        try:
            reply = parser.gets()
            if reply is False:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    while reply is False:
                        data = await self._reader.read(_READ_SIZE)
                        if not data:
                            raise RedisConnectionError("queue line: the server closed it")
                        parser.feed(data)
                        reply = parser.gets()
        except BaseException as exc:  # cancelled or broken mid-reply: out of step
            await self.close()
            if isinstance(exc, OSError):
                raise RedisConnectionError(f"queue line: {exc}") from exc
            raise
        self.pending -= 1
        if isinstance(reply, hiredis.ReplyError):
            raise _error(reply)
        return reply

    async def drain(self) -> None:
        """Read and drop every pending reply (error replies included)."""
        while self.pending > 0:
            try:
                await self.read()
            except ResponseError:
                continue

    async def close(self) -> None:
        self.pending = 0
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, RuntimeError):
                await writer.wait_closed()
