"""GET /api/map (bounded, clipped window), GET /api/reports (paged, own only) and detail."""

from __future__ import annotations

from aiohttp.test_utils import TestClient
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Village
from tests.web.conftest import RegisterFn
from tests.web.helpers import add_reports
from webfront.mapview import MAX_WINDOW_RADIUS, MapOut
from webfront.reports import ReportOut, ReportsOut


async def _place(engine: AsyncEngine, village_id: int, x: int, y: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(Village).where(Village.id == village_id).values(x=x, y=y))


async def test_map_window_lists_villages_inside_with_owner(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice, bob = await register("Alice"), await register("Bob")
    await _place(engine, alice.village_id, 3, 4)
    await _place(engine, bob.village_id, 50, 50)
    resp = await client.get("/api/map?x=0&y=0&radius=5", headers=alice.auth)
    assert resp.status == 200
    window = MapOut.model_validate(await resp.json())
    assert (window.min_x, window.max_x, window.min_y, window.max_y) == (-5, 5, -5, 5)
    [village] = window.villages
    assert (village.id, village.x, village.y) == (alice.village_id, 3, 4)
    assert village.player_name == "Alice" and village.player_id == alice.player_id
    assert not village.player_is_bot
    assert village.size is None  # this game declares no place_size
    far = MapOut.model_validate(
        await (await client.get("/api/map?x=48&y=48&radius=2", headers=alice.auth)).json()
    )
    assert [v.player_name for v in far.villages] == ["Bob"]


async def test_map_window_is_clipped_to_the_map(
    client: TestClient, register: RegisterFn, web_settings: object
) -> None:
    alice = await register("Alice")
    edge = 100  # the settings' default MAP_RADIUS
    resp = await client.get(f"/api/map?x={edge}&y=-{edge}&radius=3", headers=alice.auth)
    window = MapOut.model_validate(await resp.json())
    assert (window.min_x, window.max_x) == (edge - 3, edge)
    assert (window.min_y, window.max_y) == (-edge, -edge + 3)


async def test_map_rejects_bad_windows(client: TestClient, register: RegisterFn) -> None:
    alice = await register("Alice")
    for query, code in (
        (f"x=0&y=0&radius={MAX_WINDOW_RADIUS + 1}", "invalid_request"),
        ("x=0&y=0&radius=-1", "invalid_request"),
        ("x=101&y=0", "off_map"),
        ("x=0&y=-101", "off_map"),
        ("x=0&y=99999999999999999999", "invalid_request"),
        ("x=abc&y=0", "invalid_request"),
        ("x=0", "invalid_request"),
        ("x=0&y=0&x=1", "invalid_request"),
        ("x=0&y=0&zoom=2", "invalid_request"),
        ("x=1.5&y=0", "invalid_request"),
    ):
        resp = await client.get(f"/api/map?{query}", headers=alice.auth)
        assert resp.status == 422, query
        assert (await resp.json())["error"]["code"] == code, query


async def test_reports_are_paged_newest_first_and_private(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice, bob = await register("Alice"), await register("Bob")
    mine = await add_reports(engine, alice.player_id, 25)
    await add_reports(engine, bob.player_id, 3)
    seen: list[int] = []
    for page, size in ((1, 10), (2, 10), (3, 5)):
        resp = await client.get(f"/api/reports?page={page}&per_page=10", headers=alice.auth)
        data = ReportsOut.model_validate(await resp.json())
        assert data.total == 25 and data.unread == 25 and len(data.reports) == size
        seen += [r.id for r in data.reports]
    assert seen == list(reversed(mine))
    empty = ReportsOut.model_validate(
        await (await client.get("/api/reports?page=9", headers=alice.auth)).json()
    )
    assert empty.reports == [] and empty.total == 25
    for query in ("page=0", "per_page=0", "per_page=101", "page=-1", "page=x", "page=100001"):
        resp = await client.get(f"/api/reports?{query}", headers=alice.auth)
        assert resp.status == 422, query


async def test_reading_a_report_marks_it_and_moves_the_snapshot(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    [report_id] = await add_reports(engine, alice.player_id, 1)
    before = await client.get("/api/snapshot", headers=alice.auth)
    assert (await before.json())["unread_reports"] == 1
    resp = await client.get(f"/api/reports/{report_id}", headers=alice.auth)
    assert resp.status == 200
    report = ReportOut.model_validate(await resp.json())
    assert report.id == report_id and report.is_read and report.body == {"n": 0}
    after = await client.get(
        "/api/snapshot", headers={**alice.auth, "If-None-Match": before.headers["ETag"]}
    )
    assert after.status == 200 and (await after.json())["unread_reports"] == 0
    # reading it again changes nothing, so the version stays
    await client.get(f"/api/reports/{report_id}", headers=alice.auth)
    again = await client.get(
        "/api/snapshot", headers={**alice.auth, "If-None-Match": after.headers["ETag"]}
    )
    assert again.status == 304


async def test_missing_or_malformed_report_ids_are_404(
    client: TestClient, register: RegisterFn
) -> None:
    alice = await register("Alice")
    for rid in ("999999", "abc", "-1", "0", "1.5", "99999999999999999999", "%C2%B2"):
        resp = await client.get(f"/api/reports/{rid}", headers=alice.auth)
        assert resp.status == 404, rid
        assert (await resp.json())["error"]["code"] == "not_found"
