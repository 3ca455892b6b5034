"""The snapshot body cache: keyed by version, jittered expiry, one build per version."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from common.clock import ManualClock
from common.settings import Settings
from common.snapshot_versions import bump_versions
from db.models import Village
from tests.waiting import wait_for
from tests.web.conftest import PASSWORD, MakeClient, RegisterFn
from tests.web.helpers import counter, drop_other_connections, version_pushed
from webfront import keys, snapshot_reads
from webfront.snapshot import SNAPSHOTS, SnapshotService
from webfront.snapshot_reads import SnapshotReads


async def rename_villages(engine: AsyncEngine, player_id: int, name: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(Village).where(Village.player_id == player_id).values(name=name))


async def test_a_new_version_always_gets_the_new_body(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, redis: Redis,
    web_settings: Settings, clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    old = await client.get("/api/snapshot", headers=alice.auth)
    etag = old.headers["ETag"]
    for step in range(3):
        await rename_villages(engine, alice.player_id, f"Renamed {step}")
        await clock.advance(1)
        await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
        await version_pushed(client, alice.player_id)
        for headers in (alice.auth, {**alice.auth, "If-None-Match": etag}):
            resp = await client.get("/api/snapshot", headers=headers)
            assert resp.status == 200
            assert resp.headers["ETag"] != etag
            assert (await resp.json())["villages"][0]["name"] == f"Renamed {step}"
        etag = resp.headers["ETag"]
    # one body per player and format, of the latest build: older versions' are gone
    await client.app[SNAPSHOTS].drain()  # bodies are stored in the background
    cached = await redis.get(keys.snapshot(web_settings.redis_prefix, alice.player_id, "j"))
    assert isinstance(cached, bytes) and cached.startswith(etag[1:-1].encode() + b":")


async def test_bodies_expire_at_jittered_times(
    make_client: MakeClient, register: RegisterFn, redis: Redis, web_settings: Settings
) -> None:
    ttl_ms, jitter = 60_000, 0.5
    client = await make_client(snapshot_cache_ttl_ms=ttl_ms, snapshot_cache_jitter=jitter)
    service = client.app[SNAPSHOTS]
    samples = [service.body_ttl_ms() for _ in range(500)]
    assert all(ttl_ms <= t < ttl_ms * (1 + jitter) for t in samples)
    assert max(samples) - min(samples) > ttl_ms * jitter * 0.8  # spread over the whole range
    pttls = []
    for i in range(8):
        resp = await client.post("/api/register", json={"name": f"Player{i}", "password": PASSWORD})
        token = (await resp.json())["token"]
        client.session.cookie_jar.clear()
        got = await client.get("/api/snapshot", headers={"Authorization": f"Bearer {token}"})
        key = keys.snapshot(web_settings.redis_prefix, (await got.json())["player_id"], "j")
        await client.app[SNAPSHOTS].drain()  # bodies are stored in the background
        pttls.append(await redis.pttl(key))
    assert all(ttl_ms - 5_000 < t <= ttl_ms * (1 + jitter) for t in pttls), pttls
    assert len(set(pttls)) > 4  # bodies built together expire apart


@pytest.fixture
def counted_builds(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Count database statements (``build_snapshots`` calls), the players each read and
    their concurrency; each statement waits for ``release``."""
    real: Callable[..., Any] = snapshot_reads.build_snapshots
    state: dict[str, Any] = {
        "calls": 0, "batches": [], "running": 0, "peak": 0, "release": asyncio.Event()
    }  # fmt: skip

    async def counting(conn: AsyncConnection, player_ids: list[int]) -> dict[int, Any]:
        state["calls"] += 1
        state["batches"].append(sorted(player_ids))
        state["running"] += 1
        state["peak"] = max(state["peak"], state["running"])
        try:
            await state["release"].wait()
            return dict(await real(conn, player_ids))
        finally:
            state["running"] -= 1

    monkeypatch.setattr(snapshot_reads, "build_snapshots", counting)
    return state


@pytest.fixture
def entered_body(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the polls that reached ``SnapshotService.body`` (each finds the build in flight
    or starts it)."""
    real = SnapshotService.body
    state = {"calls": 0}

    async def counting(self: SnapshotService, player_id: int, version: str, packed: bool) -> bytes:
        state["calls"] += 1
        return await real(self, player_id, version, packed)

    monkeypatch.setattr(SnapshotService, "body", counting)
    return state


async def test_concurrent_misses_of_one_version_build_once(
    client: TestClient,
    register: RegisterFn,
    counted_builds: dict[str, Any],
    entered_body: dict[str, int],
) -> None:
    alice = await register("Alice")
    polls = [
        asyncio.ensure_future(client.get("/api/snapshot", headers=alice.auth)) for _ in range(20)
    ]
    # all 20 wait for a body, the first one's build is held until released
    await wait_for(
        lambda: entered_body["calls"] == 20 and counted_builds["calls"] == 1,
        "20 polls in, one build",
    )
    counted_builds["release"].set()
    answers = await asyncio.gather(*polls)
    assert [r.status for r in answers] == [200] * 20
    bodies = [await r.json() for r in answers]
    assert all(b["villages"] == bodies[0]["villages"] for b in bodies)
    assert counted_builds["calls"] == 1


async def _players(client: TestClient, count: int) -> list[tuple[str, int]]:
    """(token, player id) of ``count`` new players."""
    players = []
    for i in range(count):
        resp = await client.post("/api/register", json={"name": f"Player{i}", "password": PASSWORD})
        data = await resp.json()
        players.append((data["token"], data["player_id"]))
    client.session.cookie_jar.clear()
    return players


async def test_a_burst_of_misses_reads_the_database_in_a_few_batched_statements(
    make_client: MakeClient, counted_builds: dict[str, Any]
) -> None:
    client = await make_client(snapshot_builds=2, snapshot_batch=3)
    players = await _players(client, 9)

    def poll(token: str) -> asyncio.Future[Any]:
        return asyncio.ensure_future(
            client.get("/api/snapshot", headers={"Authorization": f"Bearer {token}"})
        )

    # one at a time: polls of one loop iteration would share a statement
    first = [poll(players[0][0])]
    await wait_for(lambda: counted_builds["calls"] == 1, "one build")
    first.append(poll(players[1][0]))
    await wait_for(lambda: counted_builds["calls"] == 2, "two builds")  # both slots busy
    rest = [poll(t) for t, _ in players[2:]]
    reads = client.app[SNAPSHOTS].reads
    await wait_for(
        lambda: len(reads.waiting) == 7, "7 reads waiting"
    )  # the 7 others wait for a slot
    assert counted_builds["calls"] == 2 and counted_builds["running"] == 2
    counted_builds["release"].set()
    answers = await asyncio.gather(*first, *rest)
    assert [r.status for r in answers] == [200] * 9
    for (_, player_id), answer in zip(players, answers, strict=True):
        assert (await answer.json())["player_id"] == player_id
    # the 7 that waited were read 3 at a time (snapshot_batch), never more than 2 at once
    sizes = sorted(len(b) for b in counted_builds["batches"][2:])
    assert sizes == [1, 3, 3] and counted_builds["peak"] == 2
    assert sorted(p for b in counted_builds["batches"] for p in b) == sorted(p for _, p in players)


async def test_reads_within_the_gather_window_of_the_last_statement_share_the_next(
    make_client: MakeClient, counted_builds: dict[str, Any]
) -> None:
    """``snapshot_gather_ms``: a read in a quiet process runs at once; reads asked within
    the window after a statement wait for its end and are read by ONE statement."""
    client = await make_client()
    players = await _players(client, 4)
    ids = [p for _, p in players]
    counted_builds["release"].set()
    pace = ManualClock()
    reads = SnapshotReads(client.app[SNAPSHOTS].engine, 4, 64, gather_ms=20, clock=pace)
    first = await reads.read(ids[0])  # the clock stands still: nothing waited
    assert first is not None and first["player_id"] == ids[0]
    await pace.advance(5)
    later = [asyncio.ensure_future(reads.read(p)) for p in ids[1:]]
    await wait_for(pace.slept_on, "the next statement waits for the window's end")
    assert counted_builds["calls"] == 1 and not any(r.done() for r in later)
    await pace.advance(15)
    found = await asyncio.gather(*later)
    assert [s["player_id"] for s in found if s is not None] == ids[1:]
    assert counted_builds["batches"] == [[ids[0]], sorted(ids[1:])]


async def test_a_batch_gives_each_player_their_own_snapshot(
    make_client: MakeClient, engine: AsyncEngine
) -> None:
    """One statement for many players: each gets exactly what a read of them alone gives."""
    client = await make_client()
    players = await _players(client, 4)
    await rename_villages(engine, players[1][1], "Second")
    service = client.app[SNAPSHOTS]
    ids = [p for _, p in players]
    async with service.engine.connect() as conn:
        together = await snapshot_reads.build_snapshots(conn, [*ids, 987654321])
        alone = {p: (await snapshot_reads.build_snapshots(conn, [p]))[p] for p in ids}
    assert together == alone and set(together) == set(ids)  # no row for a missing player
    assert {v["name"] for v in together[players[1][1]]["villages"]} == {"Second"}


async def test_a_failed_build_fails_its_waiters_and_the_next_poll_builds_again(
    client: TestClient,
    register: RegisterFn,
    monkeypatch: pytest.MonkeyPatch,
    entered_body: dict[str, int],
) -> None:
    alice = await register("Alice")
    real = snapshot_reads.build_snapshots
    calls = 0

    async def failing(conn: AsyncConnection, player_ids: list[int]) -> dict[int, Any]:
        nonlocal calls
        calls += 1
        await wait_for(
            lambda: entered_body["calls"] == 5, "5 polls in"
        )  # the other 4 wait for this build
        raise RuntimeError("boom")

    monkeypatch.setattr(snapshot_reads, "build_snapshots", failing)
    answers = await asyncio.gather(
        *(client.get("/api/snapshot", headers=alice.auth) for _ in range(5))
    )
    assert [r.status for r in answers] == [500] * 5 and calls == 1
    monkeypatch.setattr(snapshot_reads, "build_snapshots", real)
    assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)  # a server that can drop one
async def test_a_connection_dropped_in_the_pool_is_replaced_once(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, redis: Redis,
    web_settings: Settings, clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200
    await drop_other_connections(engine)  # a restart
    await clock.advance(1)
    await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
    for _ in range(3):
        assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200


async def test_the_batch_statement_reaches_rows_through_indexes(client: TestClient) -> None:
    """The tables of a real world are large: each part finds its rows from the batch's
    player ids through an index (SQLite), and PostgreSQL sessions keep the generic plan
    instead of planning every read anew (the planner cannot size an array parameter)."""
    from sqlalchemy import text

    from webfront import snapshot_build

    async with client.app[SNAPSHOTS].engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            mode = (await conn.execute(text("SHOW plan_cache_mode"))).scalar()
            assert mode == "force_generic_plan"
            return
        compiled = snapshot_build._compiled(conn.dialect)
        raw = await conn.get_raw_connection()
        plan = await raw.driver_connection.execute_fetchall(  # type: ignore[union-attr]
            "EXPLAIN QUERY PLAN " + compiled.string,
            snapshot_build._params(compiled, conn.dialect, [1, 2]),
        )
    scans = {row[3].split(" USING")[0] for row in plan if row[3].startswith("SCAN")}
    assert scans <= {"SCAN json_each VIRTUAL TABLE INDEX 1:", "SCAN parts"}, scans
    # the troops away are found by their home (ix_troops_home), not by a scan of troops
    assert any("USING INDEX ix_troops_home" in row[3] for row in plan), plan


def counted(metrics_text: str) -> float:
    """The snapshot builds counted in a /metrics answer."""
    return counter(metrics_text, "webfront_snapshot_builds_total")


async def test_builds_and_statements_are_counted_and_a_cached_body_is_neither(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings,
    clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")

    async def counts() -> tuple[float, float]:
        text = await (await client.get("/metrics")).text()
        return counted(text), counter(text, "webfront_snapshot_statements_total")

    builds, statements = await counts()
    for _ in range(3):  # one build, then the body caches
        assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200
    assert await counts() == (builds + 1, statements + 1)
    await clock.advance(1)
    await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
    await version_pushed(client, alice.player_id)
    assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200
    assert await counts() == (builds + 2, statements + 2)


async def test_with_the_body_caches_off_every_full_answer_is_built(
    make_client: MakeClient, redis: Redis, web_settings: Settings
) -> None:
    """``snapshot_cache_ttl_ms=0`` and ``local_cache_bodies=0``: what ``bench web`` measures
    a snapshot build with. Nothing is stored in Redis, and every answer is built anew."""
    client = await make_client(snapshot_cache_ttl_ms=0, local_cache_bodies=0)
    resp = await client.post("/api/register", json={"name": "Alice", "password": PASSWORD})
    auth = {"Authorization": f"Bearer {(await resp.json())['token']}"}
    client.session.cookie_jar.clear()
    before = counted(await (await client.get("/metrics")).text())
    for _ in range(4):
        got = await client.get("/api/snapshot", headers=auth)
        assert got.status == 200
    assert counted(await (await client.get("/metrics")).text()) == before + 4
    await client.app[SNAPSHOTS].drain()
    player_id = (await got.json())["player_id"]
    for form in ("j", "m"):
        assert await redis.exists(keys.snapshot(web_settings.redis_prefix, player_id, form)) == 0
