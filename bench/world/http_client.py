"""The load generator's HTTP client: keep-alive HTTP/1.1 connections to one server, each an
``asyncio.Protocol`` whose answers httptools (llhttp, the parser of Node.js) takes apart.

The world bench runs its load generators on the machine it measures, so what they spend per
request is taken from the stack: aiohttp's client (a session, a connector, a request and a
response object, their tracing and cookie hooks per request) cost several times what the
stack's web process spends answering a poll. This client does only what the player model
needs: a request is bytes written to an idle connection of the pool, its answer the status,
the ETag and the body.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import NamedTuple

import httptools


class Answer(NamedTuple):
    status: int
    etag: str | None
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer to ``waiter``."""

    def __init__(self, pool: Client) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Answer] | None = None
        self.etag: str | None = None
        self.body: list[bytes] = []

    def send(self, request: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def closing(self) -> bool:
        """Closed or closing, by either end (also once the connection is lost)."""
        return self.transport is None or self.transport.is_closing()

    # ---- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"the server's answer is not HTTP: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.forget(self)
        self._fail(ConnectionError("the server closed the connection"))

    # ---- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 4 and name.lower() == b"etag":
            self.etag = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        answer = Answer(self.parser.get_status_code(), self.etag, b"".join(self.body))
        keep = self.parser.should_keep_alive()
        waiter, self.waiter, self.etag, self.body = self.waiter, None, None, []
        if waiter is None or waiter.done():  # an answer nobody waits for: the connection is off
            self.close()
            return
        waiter.set_result(answer)
        if keep:
            self.pool.release(self)
        else:
            self.close()

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class Client:
    """At most ``limit`` connections to ``host:port``; a request waits for one to be idle.
    A request that takes over ``timeout_s`` (waiting for a connection included) raises
    TimeoutError and its connection is closed (its answer may still come)."""

    def __init__(self, host: str, port: int, limit: int, timeout_s: float) -> None:
        self.host, self.port, self.limit, self.timeout_s = host, port, limit, timeout_s
        self.idle: list[_Connection] = []
        self.opened = 0  # connections open or opening
        self.queue: deque[asyncio.Future[_Connection | None]] = deque()
        self.connections: set[_Connection] = set()

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Answer:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method != "GET":
            lines.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        async with asyncio.timeout(self.timeout_s):
            connection = await self._acquire()
            answered = connection.send(request)
            try:
                return await answered
            except BaseException:
                if not answered.done() or answered.cancelled():
                    connection.close()  # its answer is unread: it cannot serve another request
                raise

    async def _acquire(self) -> _Connection:
        while True:
            while self.idle:
                connection = self.idle.pop()
                if not connection.closing():
                    return connection
            if self.opened < self.limit:
                return await self._open()
            # wait for a connection to be released, or for a closed one's slot (None)
            waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
            self.queue.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # handed over as it was cancelled
                    self._hand_on(waiter.result())
                raise
            if handed is not None:
                return handed

    async def _open(self) -> _Connection:
        self.opened += 1
        try:
            _, protocol = await asyncio.get_running_loop().create_connection(
                lambda: _Connection(self), self.host, self.port
            )
        except BaseException:
            self.opened -= 1
            self._hand_on(None)
            raise
        connection: _Connection = protocol  # type: ignore[assignment]
        self.connections.add(connection)
        return connection

    def release(self, connection: _Connection) -> None:
        """An answered request's connection goes to the first waiting request, else idles."""
        self._hand_on(connection)

    def forget(self, connection: _Connection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self.opened -= 1
            self._hand_on(None)

    def _hand_on(self, connection: _Connection | None) -> None:
        """A connection (or, as None, a closed connection's free slot) to the first request
        that still waits for one."""
        while self.queue:
            waiter = self.queue.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        if connection is not None:
            self.idle.append(connection)

    def close(self) -> None:
        for connection in list(self.connections):
            connection.close()
