"""Operator accounts are apart from players: own login, sessions, cookie; CSRF rules."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.settings import Settings
from db.models import AuditEntry, PlayerBan
from tests.admin.conftest import OPERATOR, OPERATOR_PASSWORD, RegisterFn, operator_login
from tests.web.conftest import FAST_CONFIG
from webfront.admin.operators import COOKIE
from webfront.app import create_app
from webfront.config import Limit
from webfront.routing import ENDPOINTS


async def test_operator_logs_in_with_cookie_and_out(client: TestClient, operator_id: int) -> None:
    resp = await client.post(
        "/admin/api/login", json={"name": OPERATOR, "password": OPERATOR_PASSWORD}
    )
    assert resp.status == 200
    cookie = resp.cookies[COOKIE]
    assert cookie["path"] == "/admin" and cookie["httponly"] and cookie["samesite"] == "Strict"
    me = await client.get("/admin/api/me")  # the cookie jar carries the session
    assert me.status == 200 and (await me.json())["name"] == OPERATOR
    assert me.headers["Cache-Control"] == "no-store"
    out = await client.post("/admin/api/logout", json={})
    assert out.status == 200
    client.session.cookie_jar.update_cookies({COOKIE: cookie.value})  # a stolen copy
    assert (await client.get("/admin/api/me")).status == 401


async def test_wrong_password_or_name_is_401(client: TestClient, operator_id: int) -> None:
    for name, password in ((OPERATOR, "not the password"), ("nobody-here", OPERATOR_PASSWORD)):
        resp = await client.post("/admin/api/login", json={"name": name, "password": password})
        assert resp.status == 401
        assert (await resp.json())["error"]["code"] == "invalid_credentials"


async def test_a_player_session_never_opens_the_console(
    client: TestClient, register: RegisterFn, operator_id: int
) -> None:
    alice = await register("alice")
    # a player who also knows an operator's name cannot log in there with their password
    resp = await client.post("/admin/api/login", json={"name": "alice", "password": "x" * 8})
    assert resp.status in (401, 422)
    for headers in (
        alice.auth,
        {"Cookie": f"wg_session={alice.token}"},
        {"Cookie": f"{COOKIE}={alice.token}"},  # their token in the operators' cookie
    ):
        for path in ("/admin/api/me", "/admin/api/overview", "/admin/api/audit"):
            got = await client.get(path, headers=headers)
            assert got.status == 401, (path, headers)
            assert (await got.json())["error"]["code"] == "unauthorized"
        ban = await client.post(
            f"/admin/api/players/{alice.player_id}/ban", json={"reason": "x"}, headers=headers
        )
        assert ban.status == 401
    # and an operator's session is no player's
    ops = await operator_login(client)
    assert (await client.get("/api/snapshot", headers=ops)).status == 401


async def test_csrf_unsafe_requests_need_json(
    client: TestClient, register: RegisterFn, operator_id: int, db: AsyncEngine
) -> None:
    alice = await register("alice")
    login = await client.post(
        "/admin/api/login", json={"name": OPERATOR, "password": OPERATOR_PASSWORD}
    )
    token = login.cookies[COOKIE].value
    # what a form on another site could send with the cookie: refused before the handler
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data"):
        resp = await client.post(
            f"/admin/api/players/{alice.player_id}/ban",
            data="reason=forged",
            headers={"Content-Type": content_type, "Cookie": f"{COOKIE}={token}"},
        )
        assert resp.status == 415
        assert (await resp.json())["error"]["code"] == "unsupported_media_type"
    async with db.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(PlayerBan))).scalar() == 0
        assert (await conn.execute(select(func.count()).select_from(AuditEntry))).scalar() == 0


async def test_bad_input_gets_the_error_shape(client: TestClient, ops: dict[str, str]) -> None:
    cases = [
        ("POST", "/admin/api/players/abc/ban", {"reason": "x"}, 404),
        ("POST", "/admin/api/players/999999/ban", {"reason": "x"}, 404),
        ("POST", "/admin/api/players/1/ban", {"reason": ""}, 422),
        ("POST", "/admin/api/players/1/ban", {"reason": "x", "extra": 1}, 422),
        ("POST", "/admin/api/dead/12/requeue", {"x": 1}, 422),
        ("GET", "/admin/api/audit?limit=0", None, 422),
        ("GET", "/admin/api/players?name=" + "x" * 65, None, 422),
        ("GET", "/admin/api/villages/0", None, 404),
        ("GET", "/admin/api/players/99999", None, 404),
        ("POST", "/admin/api/reports/99999/replay", {}, 404),
    ]
    for method, path, body, status in cases:
        resp = await client.request(method, path, json=body, headers=ops)
        assert resp.status == status, (path, await resp.text())
        error = (await resp.json())["error"]
        assert set(error) >= {"code", "message"}


async def test_operator_login_is_rate_limited_per_name(
    aiohttp_client: Any, game_settings: Settings, clock: ManualClock, operator_id: int
) -> None:
    config = replace(FAST_CONFIG, login_per_account=Limit(2, 60_000))
    client: TestClient = await aiohttp_client(create_app(game_settings, clock, config=config))
    for _ in range(2):
        resp = await client.post("/admin/api/login", json={"name": OPERATOR, "password": "x" * 8})
        assert resp.status == 401
    resp = await client.post(
        "/admin/api/login", json={"name": OPERATOR, "password": OPERATOR_PASSWORD}
    )
    assert resp.status == 429 and int(resp.headers["Retry-After"]) >= 1
    assert (await resp.json())["error"]["code"] == "too_many_attempts"


async def test_every_console_route_refuses_a_player(
    client: TestClient, register: RegisterFn, operator_id: int
) -> None:
    alice = await register("alice")
    routes = [e for e in client.app[ENDPOINTS] if e.path.startswith("/admin/") and e.auth]
    assert len(routes) >= 10
    for endpoint in routes:
        path = re.sub(r"\{id\}", str(alice.player_id), endpoint.path)
        for headers in (alice.auth, {"Cookie": f"wg_session={alice.token}"}):
            resp = await client.request(endpoint.method, path, json={}, headers=headers)
            assert resp.status == 401, (endpoint.path, headers)


async def test_operator_sessions_expire(
    client: TestClient, operator_id: int, clock: ManualClock, game_settings: Settings
) -> None:
    ops = await operator_login(client)
    me = await client.get("/admin/api/me", headers=ops)
    assert me.status == 200
    ttl_ms = game_settings.operator_session_ttl_s * 1000
    await clock.advance(ttl_ms - 1)
    assert (await client.get("/admin/api/me", headers=ops)).status == 200
    await clock.advance(1)
    assert (await client.get("/admin/api/me", headers=ops)).status == 401
