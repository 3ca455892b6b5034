"""Isolation (invariant 6): every authenticated route with another player's token.

The table below must name every route that needs a session; a new route
fails ``test_every_authenticated_route_is_in_the_matrix`` until it is added.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.web.conftest import Player, RegisterFn
from tests.web.helpers import add_reports, set_wood, wood_fixed
from webfront.push import PUSH
from webfront.routing import ENDPOINTS

Check = Callable[[TestClient, Player, Player, dict[str, Any]], Awaitable[None]]


async def _snapshot(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    data = await (await client.get("/api/snapshot", headers=bob.auth)).json()
    assert data["player_id"] == bob.player_id
    assert [v["id"] for v in data["villages"]] == [bob.village_id]
    assert data["unread_reports"] == 0  # Alice has reports; Bob none


async def _map(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    # the map is public by design (positions, names, owners, whether a bot, the game's
    # size): nothing private in it
    data = await (await client.get("/api/map?x=0&y=0&radius=15", headers=bob.auth)).json()
    public = {"id", "name", "x", "y", "player_id", "player_name", "player_is_bot", "size"}
    assert all(set(v) == public for v in data["villages"])


async def _reports(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    data = await (await client.get("/api/reports", headers=bob.auth)).json()
    assert data["total"] == 0 and data["reports"] == []


async def _report(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    for report_id in ctx["alice_reports"]:
        resp = await client.get(f"/api/reports/{report_id}", headers=bob.auth)
        assert resp.status == 404
        assert "report 0" not in await resp.text()
    # and Alice's stay unread
    data = await (await client.get("/api/reports", headers=alice.auth)).json()
    assert data["unread"] == len(ctx["alice_reports"])


async def _logout(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    # Bob's logout ends Bob's session only, even if he sends Alice's cookie along
    resp = await client.post(
        "/api/logout",
        headers={**bob.auth, "Cookie": f"wg_session={alice.token}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    assert resp.status == 200
    assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200
    assert (await client.get("/api/snapshot", headers=bob.auth)).status == 401


async def _spend(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    engine: AsyncEngine = ctx["engine"]
    before = await wood_fixed(engine, alice.village_id)
    resp = await client.post(
        "/api/test/spend", json={"village_id": alice.village_id, "wood": 1}, headers=bob.auth
    )
    assert resp.status == 404
    assert (await resp.json())["error"]["code"] == "village_not_found"
    assert await wood_fixed(engine, alice.village_id) == before


async def _events(client: TestClient, alice: Player, bob: Player, ctx: dict[str, Any]) -> None:
    # Bob's stream carries Bob's changes only: Alice's change comes first, yet Bob's first
    # event is his own (one channel, in order), also when he sends Alice's cookie along
    await asyncio.wait_for(client.app[PUSH].subscribed.wait(), 10)
    resp = await client.get(
        "/api/events", headers={**bob.auth, "Cookie": f"wg_session={alice.token}"}
    )
    assert resp.status == 200
    try:
        engine: AsyncEngine = ctx["engine"]
        await set_wood(engine, bob.village_id, 100)
        for player in (alice, bob):
            body = {"village_id": player.village_id, "wood": 1}
            spent = await client.post("/api/test/spend", json=body, headers=player.auth)
            assert spent.status == 200
        etag = (await client.get("/api/snapshot", headers=bob.auth)).headers["ETag"]
        async with asyncio.timeout(10):
            while not (line := await resp.content.readline()).startswith(b"data: "):
                pass
        assert line.decode().strip() == f'data: {{"version":{etag.strip(chr(34))}}}'
    finally:
        resp.close()


MATRIX: dict[tuple[str, str], Check] = {
    ("GET", "/api/snapshot"): _snapshot,
    ("GET", "/api/events"): _events,
    ("GET", "/api/map"): _map,
    ("GET", "/api/reports"): _reports,
    ("GET", "/api/reports/{id}"): _report,
    ("POST", "/api/test/spend"): _spend,
    ("POST", "/api/logout"): _logout,  # last: it ends Bob's session
}


async def test_every_authenticated_route_is_in_the_matrix(client: TestClient) -> None:
    # the operator console's routes take no player session at all: tests/admin/test_auth.py
    needs_auth = {
        (e.method, e.path)
        for e in client.app[ENDPOINTS]
        if e.auth and not e.path.startswith("/admin/")
    }
    assert needs_auth == set(MATRIX)


async def test_another_players_token_never_reaches_their_data(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice, bob = await register("Alice"), await register("Bob")
    await set_wood(engine, alice.village_id, 100)
    ctx = {"engine": engine, "alice_reports": await add_reports(engine, alice.player_id, 2)}
    for route, check in MATRIX.items():
        try:
            await check(client, alice, bob, ctx)
        except AssertionError as exc:
            raise AssertionError(f"{route}: {exc}") from exc


async def test_every_authenticated_route_refuses_no_session(client: TestClient) -> None:
    for endpoint in client.app[ENDPOINTS]:
        if not endpoint.auth:
            continue
        path = endpoint.path.replace("{id}", "1")
        resp = await client.request(
            endpoint.method, path, json={}, headers={"Content-Type": "application/json"}
        )
        assert resp.status == 401, endpoint.path
        assert (await resp.json())["error"]["code"] == "unauthorized"
