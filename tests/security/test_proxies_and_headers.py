"""Trusted proxies (finding 5) and browser hardening headers (finding 8)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from common.clock import ManualClock
from common.errors import ConfigError
from common.settings import Settings, load_settings
from tests.conftest import TEST_REDIS_URL
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app
from webfront.config import Limit
from webfront.proxies import FORWARDING_HEADERS

PROBED = ("X-Real-IP", "X-Client-IP", "True-Client-IP", "CF-Connecting-IP")


@pytest.fixture
def app_client(
    aiohttp_client: Any, web_settings: Settings, clock: ManualClock, redis: Redis
) -> Any:
    async def make(**settings_changes: Any) -> TestClient:
        config = replace(FAST_CONFIG, login_per_address=Limit(3, 60_000))
        settings = web_settings.model_copy(update=settings_changes)
        client: TestClient = await aiohttp_client(create_app(settings, clock, config=config))
        return client

    return make


async def test_without_a_trusted_proxy_any_forwarding_header_is_not_local(app_client: Any) -> None:
    client = await app_client()
    assert (await client.get("/metrics")).status == 200  # loopback, nothing forwarded
    assert set(PROBED) <= set(FORWARDING_HEADERS)
    for name in FORWARDING_HEADERS:
        for value in ("8.8.8.8", "127.0.0.1"):
            resp = await client.get("/metrics", headers={name: value})
            assert resp.status == 404, name
            assert (await resp.json())["error"]["code"] == "not_found"


async def test_forwarded_addresses_are_believed_only_from_trusted_proxies(
    app_client: Any,
) -> None:
    untrusted = await app_client()
    # spoofed addresses from an untrusted peer all count as the peer itself
    statuses = [
        (
            await untrusted.post(
                "/api/login",
                json={"name": "nobody", "password": PASSWORD},
                headers={"X-Forwarded-For": f"198.51.100.{i}"},
            )
        ).status
        for i in range(5)
    ]
    assert statuses == [401, 401, 401, 429, 429]

    trusted = await app_client(trusted_proxies="127.0.0.1/32, ::1")
    for i in range(5):  # one address each, as the proxy says: none is limited
        resp = await trusted.post(
            "/api/login",
            json={"name": "nobody", "password": PASSWORD},
            headers={"X-Forwarded-For": f"203.0.113.{i}, 127.0.0.1"},
        )
        assert resp.status == 401
    # the client is the rightmost address the proxy did not add: a forged left entry is ignored
    assert (
        await trusted.get("/metrics", headers={"X-Forwarded-For": "127.0.0.1, 8.8.8.8"})
    ).status == 404
    assert (
        await trusted.get("/metrics", headers={"X-Forwarded-For": "8.8.8.8, 127.0.0.1"})
    ).status == 404  # 127.0.0.1 is a proxy hop: the client is 8.8.8.8
    assert (await trusted.get("/metrics", headers={"X-Forwarded-For": "127.0.0.1"})).status == 200
    assert (await trusted.get("/metrics", headers={"Forwarded": 'for="[::1]:4711"'})).status == 200
    assert (await trusted.get("/metrics", headers={"X-Real-IP": "8.8.8.8"})).status == 404
    assert (await trusted.get("/metrics")).status == 404  # a proxy that names no client


async def test_the_metrics_token_comes_from_the_environment(app_client: Any) -> None:
    client = await app_client(web_metrics_token="a-token-long-enough-1")
    proxied = {"X-Real-IP": "8.8.8.8"}
    assert (await client.get("/metrics", headers=proxied)).status == 404
    resp = await client.get(
        "/metrics", headers={**proxied, "Authorization": "Bearer a-token-long-enough-1"}
    )
    assert resp.status == 200


def test_a_bad_trusted_proxy_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUSTED_PROXIES", "10.0.0.1, not-an-address")
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES: entry 2 is not"):
        load_settings(redis_url=TEST_REDIS_URL)


async def test_pages_and_files_carry_the_browser_headers(client: TestClient) -> None:
    for path in ("/", "/static/app.js", "/static/style.css", "/static/missing.js"):
        resp = await client.get(path)
        assert resp.status in (200, 404), path
        csp = resp.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "style-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert resp.headers["Referrer-Policy"] == "no-referrer"


async def test_no_answer_names_versions(client: TestClient) -> None:
    for method, path in [("GET", "/"), ("GET", "/api/snapshot"), ("GET", "/nowhere"),
                         ("DELETE", "/api/snapshot"), ("POST", "/api/login")]:  # fmt: skip
        resp = await client.request(method, path)
        server = resp.headers["Server"]
        assert "aiohttp" not in server and "Python" not in server, (path, server)
