"""The load generator's HTTP client (``bench.world.http_client``) against a real aiohttp
server: keep-alive reuse within its connection limit, answers of every framing, and the
connection faults a run meets (a server that closes, one that never answers, one that does
not speak HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from bench.world.http_client import Client


@dataclass
class Server:
    port: int
    peers: set[tuple[str, int]] = field(default_factory=set)  # client ends seen
    release: asyncio.Event = field(default_factory=asyncio.Event)


def _app(server: Server) -> web.Application:
    async def echo(request: web.Request) -> web.Response:
        server.peers.add(request.transport.get_extra_info("peername"))  # type: ignore[union-attr]
        if request.headers.get("If-None-Match") == '"7"':
            return web.Response(status=304, headers={"ETag": '"7"'})
        body = await request.read()
        text = f"{request.method} {request.path_qs} {request.headers.get('X-Who')} ".encode()
        return web.Response(body=text + body, headers={"ETag": '"7"'})

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b"one ", b"two ", b"three"):
            await response.write(part)
        await response.write_eof()
        return response

    async def close(request: web.Request) -> web.Response:
        return web.Response(text="bye", headers={"Connection": "close"})

    async def hang(request: web.Request) -> web.Response:
        await server.release.wait()
        return web.Response(text="late")

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/close", close)
    app.router.add_get("/hang", hang)
    return app


Connect = Callable[..., Client]


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(port, limit=, timeout_s=)``: a client to 127.0.0.1, closed after the test."""
    clients: list[Client] = []

    def make(port: int, *, limit: int, timeout_s: float) -> Client:
        clients.append(Client("127.0.0.1", port, limit=limit, timeout_s=timeout_s))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    box = Server(0)
    runner = web.AppRunner(_app(box), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    box.port = runner.addresses[0][1]
    yield box
    box.release.set()
    await runner.cleanup()


async def test_answers_come_whole_and_connections_are_kept(
    server: Server, connect: Connect
) -> None:
    client = connect(server.port, limit=2, timeout_s=10)
    answers = await asyncio.gather(
        *(client.request("POST", "/echo", {"X-Who": str(i)}, b"body") for i in range(20))
    )
    assert [a.body for a in answers] == [f"POST /echo {i} body".encode() for i in range(20)]
    assert {(a.status, a.etag) for a in answers} == {(200, '"7"')}
    assert len(server.peers) == 2  # twenty requests over the limit's two connections
    not_modified = await client.request("GET", "/echo", {"If-None-Match": '"7"'})
    assert (not_modified.status, not_modified.etag, not_modified.body) == (304, '"7"', b"")
    chunked = await client.request("GET", "/chunked", {})
    assert (chunked.status, chunked.body) == (200, b"one two three")
    assert len(server.peers) == 2


async def test_a_connection_the_server_closes_is_replaced(server: Server, connect: Connect) -> None:
    client = connect(server.port, limit=1, timeout_s=10)
    assert (await client.request("GET", "/close", {})).body == b"bye"
    # the one connection's slot is free again: the next request opens another
    answer = await client.request("GET", "/echo", {"X-Who": "next"})
    assert answer.body == b"GET /echo next "
    assert client.opened == 1


async def test_a_request_unanswered_in_time_fails_and_frees_its_connection(
    server: Server, connect: Connect
) -> None:
    client = connect(server.port, limit=1, timeout_s=0.2)
    with pytest.raises(TimeoutError):
        await client.request("GET", "/hang", {})
    # the hung connection is closed, not handed on: the next request gets a new one
    answer = await client.request("GET", "/echo", {"X-Who": "after"})
    assert answer.body == b"GET /echo after "
    assert len(client.connections) == 1


async def test_requests_waiting_for_a_connection_get_one_when_it_closes(
    server: Server, connect: Connect
) -> None:
    client = connect(server.port, limit=1, timeout_s=10)
    # the first answer closes its connection while the others wait for the only slot
    answers = await asyncio.gather(
        client.request("GET", "/close", {}),
        *(client.request("GET", "/echo", {"X-Who": str(i)}) for i in range(3)),
    )
    assert [a.body for a in answers] == [b"bye"] + [f"GET /echo {i} ".encode() for i in range(3)]
    assert client.opened == 1


async def test_an_answer_that_is_not_http_is_a_connection_error(connect: Connect) -> None:
    async def talk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()

    listener = await asyncio.start_server(talk, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = connect(port, limit=1, timeout_s=10)
    try:
        for _ in range(2):  # the second waits for the first's slot and opens its own
            with pytest.raises(ConnectionError, match="not HTTP"):
                await client.request("GET", "/", {})
    finally:
        listener.close()
        await listener.wait_closed()


async def test_a_refused_connection_is_an_os_error_and_leaves_no_slot_taken(
    connect: Connect,
) -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    client = connect(port, limit=1, timeout_s=10)
    with pytest.raises(OSError):
        await client.request("GET", "/", {})
    assert client.opened == 0
