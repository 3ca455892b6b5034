"""Login limits that an attacker cannot turn against a victim (issue 14, finding 1).

Clients are told apart by ``X-Forwarded-For`` from a trusted proxy (the test
client always connects from loopback, listed in ``TRUSTED_PROXIES`` here).
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from common.clock import ManualClock
from common.settings import Settings
from tests.web.conftest import FAST_CONFIG, ON_BOTH_TOPOLOGIES, PASSWORD
from webfront.app import create_app
from webfront.config import Limit

WINDOW = 15 * 60_000


@pytest.fixture
async def proxied(
    aiohttp_client: Any, web_settings: Settings, clock: ManualClock, redis: Redis
) -> Any:
    async def make(**limits: Any) -> TestClient:
        settings = web_settings.model_copy(update={"trusted_proxies": "127.0.0.0/8, ::1"})
        app = create_app(settings, clock, config=replace(FAST_CONFIG, **limits))
        client: TestClient = await aiohttp_client(app)
        return client

    return make


async def login(client: TestClient, name: str, password: str, address: str) -> Any:
    return await client.post(
        "/api/login",
        json={"name": name, "password": password},
        headers={"X-Forwarded-For": address},
    )


async def register_victim(client: TestClient, name: str = "victim") -> None:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201
    client.session.cookie_jar.clear()


@ON_BOTH_TOPOLOGIES
async def test_attempts_refused_by_the_address_limit_cost_the_victim_nothing(proxied: Any) -> None:
    client = await proxied(
        login_per_address=Limit(5, WINDOW),
        login_per_account_address=Limit(10, WINDOW),
        login_per_account=Limit(10, WINDOW),
    )
    await register_victim(client)
    for i in range(5):  # the attacker spends its own address's budget on other names
        assert (await login(client, f"nobody{i}", "wrong guess 1", "203.0.113.9")).status == 401
    for _ in range(30):  # then hammers the victim: every attempt refused before any count
        resp = await login(client, "victim", "wrong guess 1", "203.0.113.9")
        assert resp.status == 429
        assert (await resp.json())["error"]["code"] == "too_many_attempts"
    resp = await login(client, "victim", PASSWORD, "198.51.100.7")
    assert resp.status == 200, await resp.text()


@ON_BOTH_TOPOLOGIES
async def test_one_address_cannot_lock_the_owner_out(proxied: Any) -> None:
    client = await proxied(
        login_per_address=Limit(1000, WINDOW),
        login_per_account_address=Limit(10, WINDOW),
        login_per_account=Limit(100, WINDOW),
    )
    await register_victim(client)
    statuses = [
        (await login(client, "victim", f"guess number {i}", "203.0.113.9")).status
        for i in range(40)
    ]
    assert statuses == [401] * 10 + [429] * 30
    # the right password from the attacker's address is refused too: no guessing past it
    assert (await login(client, "victim", PASSWORD, "203.0.113.9")).status == 429
    assert (await login(client, "victim", PASSWORD, "198.51.100.7")).status == 200


@ON_BOTH_TOPOLOGIES
async def test_the_account_ceiling_needs_many_addresses(proxied: Any, clock: ManualClock) -> None:
    """Guessing from many addresses still meets a per-account ceiling."""
    client = await proxied(
        login_per_address=Limit(1000, WINDOW),
        login_per_account_address=Limit(5, WINDOW),
        login_per_account=Limit(12, WINDOW),
    )
    await register_victim(client)
    statuses = [
        (await login(client, "victim", "guess again 1", f"203.0.113.{a}")).status
        for a in range(1, 4)
        for _ in range(6)
    ]
    # each address: 5 counted, its 6th refused by its own pair limit (not counted above it)
    assert statuses.count(401) == 12 and statuses.count(429) == 6
    assert (await login(client, "victim", PASSWORD, "198.51.100.7")).status == 429
    await clock.advance(WINDOW)
    assert (await login(client, "victim", PASSWORD, "198.51.100.7")).status == 200


async def test_made_up_names_make_no_rate_limit_keys(
    proxied: Any, redis: Redis, redis_prefix: str
) -> None:
    client = await proxied(login_per_address=Limit(10, WINDOW))
    for _ in range(60):
        resp = await login(client, f"x{secrets.token_hex(8)}", "wrong guess 1", "203.0.113.9")
        assert resp.status in (401, 429)
    found = [key async for key in redis.scan_iter(match=f"{redis_prefix}:rl:*")]
    assert len(found) == 1  # the address's window: nothing per name
    assert b"login-address" in found[0]
