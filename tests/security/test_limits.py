"""Denial of service through expensive or oversized requests, and the public surface
(SECURITY.md, "Rate limits", "Request size and windows", "Authorization on every route")."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Player
from refgame.models import March
from tests.security.conftest import register_game_player
from tests.web.conftest import PASSWORD, MakeClient
from webfront.config import Limit
from webfront.routing import ENDPOINTS

# Every route a client without a session may call. Anything else needs a session: a new
# public route (an admin page, a debug endpoint) fails this test until it is justified here.
PUBLIC = {
    ("POST", "/api/register"),
    ("POST", "/api/login"),
    ("GET", "/api/time"),
    ("GET", "/api/openapi.json"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),  # loopback or metrics token only: test_ops
    ("GET", "/"),
    ("GET", "/static/{filename:.+}"),  # the client's folder, subfolders included
    ("GET", "/sdk/{filename}"),
    # the operator console's page, its files and its login (operators' own accounts and
    # limits: tests/admin); every /admin/api route behind it needs an operator session
    ("GET", "/admin"),
    ("GET", "/admin/static/{filename}"),
    ("POST", "/admin/api/login"),
}


async def test_only_the_listed_routes_are_public(client: TestClient) -> None:
    public = {(e.method, e.path) for e in client.app[ENDPOINTS] if not e.auth}
    assert public == PUBLIC


async def test_registration_is_limited_per_address_before_any_work(
    make_client: MakeClient, engine: AsyncEngine
) -> None:
    client = await make_client(register_per_address=Limit(3, 60_000))
    for i in range(3):
        resp = await client.post("/api/register", json={"name": f"farm{i}", "password": PASSWORD})
        assert resp.status == 201
        client.session.cookie_jar.clear()
    resp = await client.post("/api/register", json={"name": "farm9", "password": PASSWORD})
    assert resp.status == 429 and int(resp.headers["Retry-After"]) >= 1
    assert (await resp.json())["error"]["code"] == "too_many_attempts"
    # the limit comes before the body is even parsed (so before any password is hashed)
    resp = await client.post(
        "/api/register", data=b"{", headers={"Content-Type": "application/json"}
    )
    assert resp.status == 429
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(Player))).scalar() == 3


async def test_a_march_with_too_many_unit_kinds_is_refused(game_client: Any) -> None:
    alice = await register_game_player(game_client, "alice")
    troops = {f"unit_{chr(97 + i % 26)}{i}": 1 for i in range(200)}
    resp = await game_client.post(
        "/api/march",
        json={"village_id": alice["village_id"], "kind": "raid", "x": 0, "y": 0,
              "troops": troops},
        headers=alice["auth"],
    )  # fmt: skip
    assert resp.status == 422
    assert (await resp.json())["error"]["code"] == "invalid_request"


async def test_numbers_past_their_bounds_are_refused_before_the_database(game_client: Any) -> None:
    alice = await register_game_player(game_client, "alice")
    for body in (
        {"village_id": alice["village_id"], "unit": "legionnaire", "count": 10**9},
        {"village_id": 2**63, "unit": "legionnaire", "count": 1},
        {"village_id": alice["village_id"], "unit": "legionnaire", "count": 1e3},
    ):
        resp = await game_client.post("/api/train", json=body, headers=alice["auth"])
        assert resp.status == 422, body
    resp = await game_client.post(
        "/api/march",
        json={"village_id": alice["village_id"], "kind": "raid", "x": 10**6, "y": 0,
              "troops": {"legionnaire": 1}},
        headers=alice["auth"],
    )  # fmt: skip
    assert resp.status == 422


async def test_map_and_report_windows_are_bounded(client: TestClient, register: Any) -> None:
    """Also in tests/web/test_map_reports.py; here as the DoS bound it is."""
    alice = await register("Alice")
    for path in ("/api/map?x=0&y=0&radius=16", "/api/reports?per_page=101"):
        resp = await client.get(path, headers=alice.auth)
        assert resp.status == 422, path


async def test_concurrent_marches_never_send_the_same_troops_twice(
    game_client: Any, settings: Any
) -> None:
    """Resource duplication through a race: 20 requests for the same 10 troops."""
    import asyncio

    from db.engine import create_engine
    from db.models import Village
    from refgame.models import Troop

    alice = await register_game_player(game_client, "alice")
    bob = await register_game_player(game_client, "bob")
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(Troop).values(
                    village_id=alice["village_id"], home_village_id=alice["village_id"],
                    unit="legionnaire", count=10,
                )
            )  # fmt: skip
            x, y = (
                await conn.execute(select(Village.x, Village.y).where(
                    Village.id == bob["village_id"]))
            ).one()  # fmt: skip
        body = {"village_id": alice["village_id"], "kind": "raid", "x": x, "y": y,
                "troops": {"legionnaire": 10}}  # fmt: skip
        answers = await asyncio.gather(
            *(game_client.post("/api/march", json=body, headers=alice["auth"]) for _ in range(20))
        )
        statuses = sorted(a.status for a in answers)
        assert statuses.count(200) == 1, statuses
        assert set(statuses) <= {200, 409}
        async with engine.connect() as conn:
            left = (
                await conn.execute(select(Troop.count).where(
                    Troop.village_id == alice["village_id"]))
            ).scalar_one()  # fmt: skip
            marches = (await conn.execute(select(func.count()).select_from(March))).scalar()
        assert (left, marches) == (0, 1)
    finally:
        await engine.dispose()
