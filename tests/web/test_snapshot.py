"""GET /api/snapshot: content, ETag and 304, the body cache, msgpack, hidden enemy troops."""

from __future__ import annotations

import msgpack
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.amounts import SCALE
from common.clock import ManualClock
from common.settings import Settings
from common.snapshot_versions import bump_versions, version_key
from db.models import Village
from tests.web.conftest import ON_BOTH_TOPOLOGIES, RegisterFn
from tests.web.helpers import add_march, add_reports, session_pushed, version_pushed
from webfront import keys
from webfront.sessions import token_hash
from webfront.snapshot import SNAPSHOTS, SnapshotOut, held_version
from webfront.snapshot_build import build_snapshots


async def test_snapshot_content_matches_its_schema(
    client: TestClient, register: RegisterFn, clock: ManualClock
) -> None:
    alice = await register("Alice")
    resp = await client.get("/api/snapshot", headers=alice.auth)
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    data = await resp.json()
    snapshot = SnapshotOut.model_validate(data)
    assert snapshot.server_time_ms == clock.now_ms()
    assert snapshot.player_id == alice.player_id and snapshot.name == "Alice"
    assert snapshot.unread_reports == 0
    [village] = snapshot.villages
    assert village.id == alice.village_id
    assert village.buildings and all(level >= 0 for level in village.buildings.values())
    wood = village.stocks.wood
    assert wood.units == wood.fixed // SCALE and wood.cap > 0 and wood.rate_per_hour > 0
    assert village.stocks.scale == SCALE and village.stocks.updated_ms == clock.now_ms()
    assert resp.headers["ETag"].startswith('"') and resp.headers["Vary"] == "Accept"


@ON_BOTH_TOPOLOGIES
async def test_if_none_match_gives_304_until_the_version_moves(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings,
    clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    first = await client.get("/api/snapshot", headers=alice.auth)
    etag = first.headers["ETag"]
    for held in (etag, f"W/{etag}", f'{etag}, "other"'):
        resp = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": held})
        assert resp.status == 304, held
        assert resp.headers["ETag"] == etag
        assert resp.headers["Cache-Control"] == "private, no-cache"
        assert resp.headers["Vary"] == "Accept" and "Transfer-Encoding" not in resp.headers
        assert await resp.read() == b""
    stale = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": '"1"'})
    assert stale.status == 200
    await clock.advance(5)
    await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
    await version_pushed(client, alice.player_id)
    resp = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
    assert resp.status == 200
    assert resp.headers["ETag"] != etag
    again = await client.get(
        "/api/snapshot", headers={**alice.auth, "If-None-Match": resp.headers["ETag"]}
    )
    assert again.status == 304


@ON_BOTH_TOPOLOGIES
async def test_a_version_lost_in_redis_never_matches_an_old_etag(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings,
    clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    etag = (await client.get("/api/snapshot", headers=alice.auth)).headers["ETag"]
    await redis.delete(version_key(web_settings.redis_prefix, alice.player_id))
    await version_pushed(client, alice.player_id)
    await clock.advance(1)
    resp = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
    assert resp.status == 200 and resp.headers["ETag"] != etag


@ON_BOTH_TOPOLOGIES
async def test_the_body_of_one_version_is_built_once_and_cached(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, redis: Redis,
    web_settings: Settings, clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    first = await (await client.get("/api/snapshot", headers=alice.auth)).json()
    async with engine.begin() as conn:  # a change nobody announced with a version bump
        await conn.execute(update(Village).values(name="Renamed"))
    await clock.advance(1000)
    cached = await (await client.get("/api/snapshot", headers=alice.auth)).json()
    assert cached["villages"][0]["name"] == first["villages"][0]["name"]
    assert cached["server_time_ms"] == first["server_time_ms"] + 1000  # always fresh
    await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
    await version_pushed(client, alice.player_id)
    fresh = await (await client.get("/api/snapshot", headers=alice.auth)).json()
    assert fresh["villages"][0]["name"] == "Renamed"


@ON_BOTH_TOPOLOGIES
async def test_a_cold_session_cache_reads_the_database_once(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings
) -> None:
    alice = await register("Alice")
    etag = (await client.get("/api/snapshot", headers=alice.auth)).headers["ETag"]
    key = keys.session(web_settings.redis_prefix, token_hash(alice.token))
    await redis.delete(key)
    await session_pushed(client, token_hash(alice.token))
    resp = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
    assert resp.status == 304
    assert await redis.get(key) is not None  # cached again


async def test_msgpack_when_asked(client: TestClient, register: RegisterFn) -> None:
    alice = await register("Alice")
    as_json = await (await client.get("/api/snapshot", headers=alice.auth)).json()
    for _ in range(2):  # built, then from the cache
        resp = await client.get(
            "/api/snapshot", headers={**alice.auth, "Accept": "application/msgpack"}
        )
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "application/msgpack"
        assert msgpack.unpackb(await resp.read()) == as_json
    error = await client.get("/api/snapshot", headers={"Accept": "application/msgpack"})
    assert error.status == 401
    assert msgpack.unpackb(await error.read())["error"]["code"] == "unauthorized"
    time = await client.get("/api/time", headers={"Accept": "application/msgpack"})
    assert set(msgpack.unpackb(await time.read())) == {"server_time_ms"}


async def test_incoming_attacks_hide_their_troops(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, clock: ManualClock
) -> None:
    alice, bob = await register("Alice"), await register("Bob")
    troops = {"legionnaire": 5}
    await add_march(engine, "attack", bob.village_id, alice.village_id, troops, clock.now_ms())
    await add_march(engine, "reinforce", alice.village_id, bob.village_id, troops, clock.now_ms())
    a = SnapshotOut.model_validate(
        await (await client.get("/api/snapshot", headers=alice.auth)).json()
    )
    b = SnapshotOut.model_validate(
        await (await client.get("/api/snapshot", headers=bob.auth)).json()
    )
    [incoming] = a.villages[0].marches_in
    assert incoming.kind == "attack" and incoming.troops is None and incoming.arrive_ms > 0
    assert incoming.origin.id == bob.village_id
    [outgoing] = a.villages[0].marches_out
    assert outgoing.troops == troops
    [attack] = b.villages[0].marches_out
    assert attack.troops == troops and attack.target.id == alice.village_id
    [help_in] = b.villages[0].marches_in
    assert help_in.troops is None  # Alice's troops: Bob sees that they come, not what


async def test_unread_reports_count(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await add_reports(engine, alice.player_id, 3)
    data = await (await client.get("/api/snapshot", headers=alice.auth)).json()
    assert data["unread_reports"] == 3


def test_held_version_parsing() -> None:
    assert held_version(None) == ""
    assert held_version('"12"') == "12"
    assert held_version('W/"12"') == "12"
    assert held_version('"12", "13"') == "12"
    assert held_version("*") == "*"
    assert held_version("12") == ""


def test_every_version_key_starts_with_the_version_prefix() -> None:
    assert version_key("wg", 17).startswith(keys.version_prefix("wg"))


async def test_a_deleted_player_is_logged_out(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    from sqlalchemy import delete

    from db.models import Player

    alice = await register("Alice")
    async with engine.begin() as conn:
        await conn.execute(delete(Village).where(Village.player_id == alice.player_id))
        await conn.execute(delete(Player).where(Player.id == alice.player_id))
    resp = await client.get("/api/snapshot", headers=alice.auth)
    assert resp.status == 401


async def test_every_part_of_a_snapshot_in_order(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, clock: ManualClock
) -> None:
    """Queues, troops at home, away and visiting, and marches each way, from one statement."""
    from sqlalchemy import insert

    from refgame.models import BuildOrder, TrainingOrder, Troop
    from tests.web.helpers import next_id

    alice, bob = await register("Alice"), await register("Bob")
    a, b, now = alice.village_id, bob.village_id, clock.now_ms()
    late, early = next_id(), next_id()  # ids in the other order than done times
    async with engine.begin() as conn:
        await conn.execute(
            insert(BuildOrder),
            [
                {"id": late, "village_id": a, "kind": "farm", "target_level": 2,
                 "started_ms": now, "done_ms": now + 900},
                {"id": early, "village_id": a, "kind": "mine", "target_level": 1,
                 "started_ms": now, "done_ms": now + 500},
            ],
        )  # fmt: skip
        await conn.execute(
            insert(TrainingOrder).values(
                id=next_id(), village_id=a, unit="scout", count=3, started_ms=now, done_ms=now + 70
            )
        )
        await conn.execute(
            insert(Troop),
            [
                {"village_id": a, "home_village_id": a, "unit": "scout", "count": 4},
                {"village_id": a, "home_village_id": a, "unit": "archer", "count": 0},  # hidden
                {"village_id": a, "home_village_id": b, "unit": "guard", "count": 2},
                {"village_id": b, "home_village_id": a, "unit": "scout", "count": 1},
            ],
        )
    out = await add_march(engine, "raid", a, b, {"scout": 2}, now)
    back = await add_march(engine, "return", a, b, {"scout": 1}, now + 1)
    incoming = await add_march(engine, "attack", b, a, {"guard": 9}, now + 2)
    data = await (await client.get("/api/snapshot", headers=alice.auth)).json()
    SnapshotOut.model_validate(data)
    [village] = data["villages"]
    assert [o["id"] for o in village["build_queue"]] == [early, late]
    assert village["build_queue"][0] == {
        "id": early, "kind": "mine", "target_level": 1, "started_ms": now, "done_ms": now + 500
    }  # fmt: skip
    assert [(t["unit"], t["count"]) for t in village["training_queue"]] == [("scout", 3)]
    troops = village["troops"]  # the template's and ours, by unit
    assert troops["scout"] == 4 and "archer" not in troops and list(troops) == sorted(troops)
    assert village["reinforcements"] == [{"village_id": b, "unit": "guard", "count": 2}]
    assert village["troops_away"] == [{"village_id": b, "unit": "scout", "count": 1}]
    assert [m["id"] for m in village["marches_out"]] == [out]
    assert [m["id"] for m in village["marches_in"]] == [back, incoming]  # by arrival
    raid = village["marches_out"][0]
    assert raid["troops"] == {"scout": 2} and raid["loot"] == {}
    assert raid["origin"]["name"] == village["name"] and raid["target"]["id"] == b
    assert village["marches_in"][1]["troops"] is None  # the enemy's troops stay hidden
    assert sorted(village["buildings"]) == list(village["buildings"])  # by kind
    bob_view = await (await client.get("/api/snapshot", headers=bob.auth)).json()
    [bob_village] = bob_view["villages"]
    assert [m["id"] for m in bob_village["marches_in"]] == [out]  # the return leaves, unseen
    assert bob_village["troops_away"] == [{"village_id": a, "unit": "guard", "count": 2}]
    # one statement for both (a burst of builds): each gets what a read of them alone gives,
    # though each troop and march row here is both players'
    ids = (alice.player_id, bob.player_id)
    async with client.app[SNAPSHOTS].engine.connect() as conn:
        together = await build_snapshots(conn, ids)
        alone = [(await build_snapshots(conn, [p]))[p] for p in ids]
    assert [together[p] for p in ids] == alone
    assert {k: v for k, v in data.items() if k != "server_time_ms"} == alone[0]
