"""Requests aiohttp's parser refuses: the error shape, one log line, no token anywhere
(issue 14, finding 3)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from aiohttp.test_utils import TestClient

from tests.web.conftest import PASSWORD


async def raw(client: TestClient, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``data`` as it is; the server's answer."""
    assert client.server.host is not None and client.server.port is not None
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.decode("latin-1").strip().split("\r\n")
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)
            }
            body = await reader.readexactly(int(headers["content-length"]))
    finally:
        writer.close()
    return int(status_line.split()[1]), headers, body


def request(head: str, *headers: str, body: bytes = b"") -> bytes:
    return ("\r\n".join([head, "Host: localhost", *headers]) + "\r\n\r\n").encode() + body


async def test_parser_refusals_answer_the_error_shape_and_log_one_line(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    resp = await client.post("/api/register", json={"name": "tok_sec", "password": PASSWORD})
    token = (await resp.json())["token"]
    cases = [
        (f"Cookie: wg_session={token}; theme=dark\x01",),
        (f"Cookie: wg_session={token}", "X-Big: " + "a" * 9000),
        tuple(f"X-H{i}: {token}" for i in range(500)),
        ("Content-Length: 5", "Transfer-Encoding: chunked"),
    ]
    sent = [request("GET /api/snapshot HTTP/1.1", *c) for c in cases]
    sent += [
        request("FOO /api/snapshot HTTP/1.1", f"Cookie: wg_session={token}"),
        request("CONNECT / HTTP/1.1", f"Authorization: Bearer {token}"),
    ]
    for data in sent:
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            status, headers, body = await raw(client, data)
        assert status in (400, 404, 431), (status, body)
        assert headers["content-type"].startswith("application/json"), (status, headers, body)
        assert "aiohttp" not in headers.get("server", "") and "Python" not in headers["server"]
        error = json.loads(body)["error"]
        assert set(error) == {"code", "message"}
        assert token.encode() not in body
        records = [r for r in caplog.records if r.name.startswith(("aiohttp", "webfront"))]
        assert all(token not in r.getMessage() and r.exc_info is None for r in records)
        if status != 404:  # CONNECT is parsed and routed (to no route): no parser line
            assert len([r for r in records if r.name == "webfront.protocol"]) == 1, records
