"""Bad input gets a 4xx with the error shape and changes nothing (invariant 7)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Player
from tests.web.conftest import PASSWORD, MakeClient, RegisterFn
from tests.web.helpers import wood_fixed

JSON = {"Content-Type": "application/json"}


async def _players(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return list((await conn.execute(select(Player.name).order_by(Player.id))).scalars())


def _error(body: Any) -> dict[str, Any]:
    assert set(body) == {"error"}
    assert isinstance(body["error"]["code"], str) and isinstance(body["error"]["message"], str)
    return body["error"]


_EXPANDS = "\ufdfa".encode()
BAD_REGISTRATIONS: list[tuple[bytes, int, str]] = [
    (b"{", 400, "malformed_json"),
    (b"", 400, "malformed_json"),
    (b"\xff\xfe", 400, "malformed_json"),
    (b"[]", 422, "invalid_request"),
    (b"null", 422, "invalid_request"),
    (b'{"name": "Alice"}', 422, "invalid_request"),
    (b'{"password": "long enough pw"}', 422, "invalid_request"),
    (b'{"name": 123, "password": "long enough pw"}', 422, "invalid_request"),
    (b'{"name": "Alice", "password": true}', 422, "invalid_request"),
    (b'{"name": "Alice", "password": "short"}', 422, "invalid_request"),
    (b'{"name": "Al", "password": "long enough pw"}', 422, "invalid_request"),
    (b'{"name": "   A   ", "password": "long enough pw"}', 422, "invalid_request"),
    (b'{"name": "' + b"x" * 1000 + b'", "password": "long enough pw"}', 422, "invalid_request"),
    (
        b'{"name": "' + "ﷺ".encode() * 2 + b'", "password": "long enough pw"}',
        422,
        "invalid_request",
    ),
    (b'{"name": "Ali\\u0000ce", "password": "long enough pw"}', 422, "invalid_request"),
    (b'{"name": "Ali\\u200dce", "password": "long enough pw"}', 422, "invalid_request"),
    (b'{"name": "Alice", "password": "' + b"p" * 200 + b'"}', 422, "invalid_request"),
    (b'{"name": "Alice", "password": "long enough pw", "admin": true}', 422, "invalid_request"),
]


@pytest.mark.parametrize(("raw", "status", "code"), BAD_REGISTRATIONS)
async def test_bad_registrations_change_nothing(
    client: TestClient, engine: AsyncEngine, raw: bytes, status: int, code: str
) -> None:
    resp = await client.post("/api/register", data=raw, headers=JSON)
    assert resp.status == status
    assert _error(await resp.json())["code"] == code
    assert await _players(engine) == []


async def test_names_are_normalized_so_look_alikes_collide(
    client: TestClient, engine: AsyncEngine
) -> None:
    resp = await client.post(
        "/api/register", json={"name": "  Ａｌｉｃｅ   the\tGreat ", "password": PASSWORD}
    )
    assert resp.status == 201
    assert (await resp.json())["name"] == "Alice the Great"
    twin = await client.post(
        "/api/register", json={"name": "Alice the Great", "password": PASSWORD}
    )
    assert twin.status == 409
    unicode = await client.post("/api/register", json={"name": "Zoë Ørsted", "password": PASSWORD})
    assert unicode.status == 201
    assert await _players(engine) == ["Alice the Great", "Zoë Ørsted"]


async def test_wrong_content_type_is_415(client: TestClient, engine: AsyncEngine) -> None:
    body = b'{"name": "Alice", "password": "long enough pw"}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        resp = await client.post("/api/register", data=body, headers=headers)
        assert resp.status == 415, content_type
        assert _error(await resp.json())["code"] == "unsupported_media_type"
    assert await _players(engine) == []


async def test_oversized_body_is_413(make_client: MakeClient, engine: AsyncEngine) -> None:
    client = await make_client(max_body_bytes=1024)
    padding = "x" * 2000
    raw = f'{{"name": "Alice", "password": "long enough pw", "pad": "{padding}"}}'.encode()
    resp = await client.post("/api/register", data=raw, headers=JSON)
    assert resp.status == 413
    assert _error(await resp.json())["code"] == "payload_too_large"
    assert await _players(engine) == []


async def test_unknown_route_and_wrong_method(client: TestClient) -> None:
    resp = await client.get("/api/nothing-here")
    assert resp.status == 404 and _error(await resp.json())["code"] == "not_found"
    resp = await client.put("/api/snapshot", data=b"{}", headers=JSON)
    assert resp.status == 405 and _error(await resp.json())["code"] == "method_not_allowed"
    assert "GET" in resp.headers["Allow"]
    resp = await client.get("/api/register")
    assert resp.status == 405
    # a miss is a miss before anything else: no CSRF check (415) on a path nobody serves
    resp = await client.post("/api/nothing-here", data=b"x")
    assert resp.status == 404 and _error(await resp.json())["code"] == "not_found"
    resp = await client.post("/", data=b"x")
    assert resp.status == 405 and resp.headers["Allow"] == "GET"


async def test_static_files_are_the_folder_s_files_and_nothing_else(client: TestClient) -> None:
    # the test game has no client of its own: /static/ serves the framework's generic page
    resp = await client.get("/static/generic.js")
    assert resp.status == 200 and "javascript" in resp.headers["Content-Type"]
    assert (await client.head("/static/generic.css")).status == 200
    assert (await client.get("/sdk/webgame.js")).status == 200
    for prefix in ("static", "sdk"):
        for name in ("nothing.js", "..%2fguard.py", "%2e%2e%2fguard.py", "generic.js%00"):
            resp = await client.get(f"/{prefix}/{name}")
            assert resp.status == 404, name
            assert _error(await resp.json())["code"] == "not_found"


BAD_SPENDS: list[tuple[Any, int]] = [
    ({"village_id": 0, "wood": 1}, 422),
    ({"village_id": -5, "wood": 1}, 422),
    ({"village_id": 2**63, "wood": 1}, 422),
    ({"village_id": "1", "wood": 1}, 422),
    ({"village_id": None, "wood": 1}, 422),
    ({"wood": 1}, 422),
    ({"village_id": "OWN", "wood": 0}, 422),
    ({"village_id": "OWN", "wood": -1}, 422),
    ({"village_id": "OWN", "wood": 10**30}, 422),
    ({"village_id": "OWN", "wood": 1.5}, 422),
    ({"village_id": "OWN", "wood": True}, 422),
    ({"village_id": "OWN", "wood": "10"}, 422),
    ({"village_id": "OWN", "wood": 1, "extra": 1}, 422),
    ({"village_id": 987654321, "wood": 1}, 404),
]


@pytest.mark.parametrize(("body", "status"), BAD_SPENDS)
async def test_bad_commands_spend_nothing(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, body: Any, status: int
) -> None:
    alice = await register("Alice")
    before = await wood_fixed(engine, alice.village_id)
    payload = {k: alice.village_id if v == "OWN" else v for k, v in body.items()}
    resp = await client.post("/api/test/spend", json=payload, headers=alice.auth)
    assert resp.status == status, await resp.text()
    _error(await resp.json())
    assert await wood_fixed(engine, alice.village_id) == before


async def test_an_unexpected_error_is_500_without_internals(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    before = await wood_fixed(engine, alice.village_id)
    resp = await client.post(
        "/api/test/spend", json={"village_id": alice.village_id, "wood": 666}, headers=alice.auth
    )
    assert resp.status == 500
    text = await resp.text()
    assert "secret" not in text and "Traceback" not in text
    assert _error(await resp.json())["code"] == "internal_error"
    assert await wood_fixed(engine, alice.village_id) == before
