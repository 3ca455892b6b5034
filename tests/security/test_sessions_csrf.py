"""Session fixation, cookie attributes, CSRF and CORS (SECURITY.md, "Sessions" and "CSRF")."""

from __future__ import annotations

from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from common.settings import Settings
from tests.web.conftest import PASSWORD, RegisterFn
from tests.web.helpers import set_wood, wood_fixed
from webfront.sessions import COOKIE

SPEND = "/api/test/spend"


async def test_a_session_id_chosen_by_the_client_is_never_adopted(
    client: TestClient, register: RegisterFn
) -> None:
    await register("Mallory's victim")
    planted = "A" * 43  # what an attacker would plant in the victim's browser
    resp = await client.post(
        "/api/login",
        json={"name": "Mallory's victim", "password": PASSWORD},
        headers={"Cookie": f"{COOKIE}={planted}"},
    )
    assert resp.status == 200
    issued = resp.cookies[COOKIE].value
    assert issued != planted and (await resp.json())["token"] == issued
    client.session.cookie_jar.clear()
    resp = await client.get("/api/snapshot", headers={"Cookie": f"{COOKIE}={planted}"})
    assert resp.status == 401


async def test_login_cookie_is_httponly_samesite_strict_and_expires(
    client: TestClient, register: RegisterFn, web_settings: Settings
) -> None:
    await register("Cookie Monster")
    resp = await client.post("/api/login", json={"name": "Cookie Monster", "password": PASSWORD})
    cookie = resp.cookies[COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
    assert int(cookie["max-age"]) == web_settings.session_ttl_s
    assert not cookie["secure"]  # plain http in the test; https adds Secure
    assert resp.headers["Cache-Control"] == "no-store"
    assert len(cookie.value) >= 43  # 32 random bytes


async def test_a_cross_site_form_post_with_the_cookie_changes_nothing(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    """What a form on another site (or a no-preflight fetch) can send: never JSON."""
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 100)
    before = await wood_fixed(engine, alice.village_id)
    cookie = {"Cookie": f"{COOKIE}={alice.token}"}
    for content_type, body in (
        ("application/x-www-form-urlencoded", f"village_id={alice.village_id}&wood=50"),
        ("text/plain", f'{{"village_id": {alice.village_id}, "wood": 50}}'),
        ("multipart/form-data; boundary=x", "--x\r\n\r\n--x--"),
        (None, f'{{"village_id": {alice.village_id}, "wood": 50}}'),
    ):
        headers = {**cookie, **({"Content-Type": content_type} if content_type else {})}
        resp = await client.post(SPEND, data=body.encode(), headers=headers)
        assert resp.status == 415, content_type
        assert (await resp.json())["error"]["code"] == "unsupported_media_type"
    for path in ("/api/logout", "/api/login", "/api/register"):  # no state change either
        resp = await client.post(path, data=b"x=1", headers={
            **cookie, "Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
        assert resp.status == 415, path
    assert await wood_fixed(engine, alice.village_id) == before
    assert (await client.get("/api/snapshot", headers=cookie)).status == 200  # still logged in


async def test_no_cross_origin_access_is_granted(client: TestClient, register: RegisterFn) -> None:
    alice = await register("Alice")
    origin = {"Origin": "https://evil.example"}
    preflight = await client.options(
        SPEND,
        headers={
            **origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert "Access-Control-Allow-Origin" not in preflight.headers
    assert preflight.status >= 400
    read = await client.get("/api/snapshot", headers={**origin, **alice.auth})
    assert read.status == 200 and "Access-Control-Allow-Origin" not in read.headers
    assert "Access-Control-Allow-Credentials" not in read.headers
