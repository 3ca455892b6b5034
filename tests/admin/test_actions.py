"""The console's actions, each in the audit log: dead letters, bans, battle replays."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.queue import EventQueue, NewEvent, RetryPolicy
from common.queue.durable import add_durable_events
from common.settings import Settings
from db import events as pending
from db.engine import session_factory
from db.models import PlayerBan, ProcessedEvent, ScheduledEvent
from gameserver.builtin import NOOP_DURABLE
from refgame.battle import battle_reports, resolve_battle
from refgame.models import Report
from tests.admin.conftest import OPERATOR, PASSWORD, Player, RegisterFn
from tests.web.helpers import add_march


async def _audit(client: TestClient, ops: dict[str, str]) -> list[dict[str, Any]]:
    resp = await client.get("/admin/api/audit", headers=ops)
    assert resp.status == 200
    entries: list[dict[str, Any]] = (await resp.json())["entries"]
    return entries


async def make_dead(
    settings: Settings, redis: Redis, db: AsyncEngine, clock: ManualClock, village_id: int, n: int
) -> tuple[EventQueue, list[int]]:
    """``n`` durable events of ``village_id`` that failed for the last time, as a worker
    leaves them: in the dead letters with their reason, marked dead in the database."""
    queue = EventQueue(
        redis, prefix=settings.redis_prefix, partitions=settings.queue_partitions, clock=clock
    )
    now = clock.now_ms()
    async with session_factory(db)() as session, session.begin():
        events = await add_durable_events(
            session,
            [NewEvent(NOOP_DURABLE, village_id, now - 1000, {"n": i}) for i in range(n)],
            clock=clock,
        )
    await queue.index(events)
    partition = queue.partition_of(village_id)
    claim = await queue.claim(partition)
    assert len(claim.events) == n
    failures = [(e, "RuntimeError: the handler raised") for e in claim.events]
    policy = RetryPolicy(max_attempts=1)
    assert await queue.retry(partition, claim.token, failures, policy) == (0, n)
    async with session_factory(db)() as session, session.begin():
        await pending.mark_dead(
            session, [(e.id, 1, "RuntimeError: the handler raised") for e in claim.events], now
        )
    return queue, [e.id for e in events]


async def test_requeue_and_drop_a_dead_event(
    client: TestClient,
    ops: dict[str, str],
    register: RegisterFn,
    game_settings: Settings,
    redis: Redis,
    db: AsyncEngine,
    clock: ManualClock,
) -> None:
    alice = await register("alice")
    queue, (first, second) = await make_dead(game_settings, redis, db, clock, alice.village_id, 2)
    overview = await (await client.get("/admin/api/overview", headers=ops)).json()
    shown = {d["id"]: d for d in overview["dead_letters"]}
    assert set(shown) == {str(first), str(second)}
    assert shown[str(first)]["error"] == "RuntimeError: the handler raised"
    assert shown[str(first)]["payload"] == {"n": 0} and shown[str(first)]["kind"] == NOOP_DURABLE
    timeline = await (
        await client.get(f"/admin/api/villages/{alice.village_id}", headers=ops)
    ).json()
    assert {e["state"] for e in timeline["events"]} == {"dead"}
    assert {d["id"] for d in timeline["dead_letters"]} == {str(first), str(second)}

    resp = await client.post(f"/admin/api/dead/{first}/requeue", json={}, headers=ops)
    assert resp.status == 200, await resp.text()
    resp = await client.post(f"/admin/api/dead/{second}/drop", json={}, headers=ops)
    assert resp.status == 200, await resp.text()
    again = await client.post(f"/admin/api/dead/{second}/drop", json={}, headers=ops)
    assert again.status == 409 and (await again.json())["error"]["code"] == "not_done"

    assert await queue.dead() == []
    [stats] = await queue.stats([queue.partition_of(alice.village_id)])
    assert stats.depth == 1  # the requeued one waits to run
    async with db.connect() as conn:
        rows = await conn.execute(
            select(ScheduledEvent.id, ScheduledEvent.attempts, ScheduledEvent.dead_ms)
        )
        assert [tuple(r) for r in rows] == [(first, 0, None)]
    entries = await _audit(client, ops)
    assert [(e["action"], e["target"], e["detail"]["done"]) for e in entries] == [
        ("drop", f"event:{second}", False),
        ("drop", f"event:{second}", True),
        ("requeue", f"event:{first}", True),
    ]
    assert {e["operator"] for e in entries} == {OPERATOR}


async def _build(client: TestClient, player: Player) -> Any:
    return await client.post(
        "/api/build", json={"village_id": player.village_id, "kind": "woodcutter"},
        headers=player.auth,
    )  # fmt: skip


async def test_ban_revokes_sessions_refuses_commands_and_login_until_unban(
    client: TestClient, ops: dict[str, str], register: RegisterFn
) -> None:
    alice, bob = await register("alice"), await register("bob")
    assert (await _build(client, alice)).status == 200
    resp = await client.post(
        f"/admin/api/players/{alice.player_id}/ban", json={"reason": "botting"}, headers=ops
    )
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["sessions_revoked"] == 1

    refused = await _build(client, alice)
    assert refused.status == 403
    assert (await refused.json())["error"]["code"] == "banned"
    login = await client.post("/api/login", json={"name": "alice", "password": PASSWORD})
    assert login.status == 403 and (await login.json())["error"]["code"] == "banned"
    client.session.cookie_jar.clear()
    assert (await _build(client, bob)).status == 200  # nobody else is touched

    found = await (await client.get("/admin/api/players?name=al", headers=ops)).json()
    assert found["players"] == [{"id": alice.player_id, "name": "alice", "banned": True}]
    like = await (await client.get("/admin/api/players?name=%25", headers=ops)).json()
    assert like["players"] == []  # a % is a character of a name, not a wildcard
    player = await (await client.get(f"/admin/api/players/{alice.player_id}", headers=ops)).json()
    assert player["player"]["ban"]["reason"] == "botting"
    assert player["player"]["live_sessions"] == 0
    assert player["villages"][0]["game"]["orders"][0]["kind"] == "build"  # the game's hook
    assert player["villages"][0]["events"][0]["state"] == "pending"
    assert player["villages"][0]["events"][0]["payload"]  # the build's payload, decoded

    resp = await client.post(f"/admin/api/players/{alice.player_id}/unban", json={}, headers=ops)
    assert resp.status == 200 and (await resp.json())["was_banned"] is True
    # the session the ban revoked stays revoked, now as an ordinary unknown one
    assert (await _build(client, alice)).status == 401
    login = await client.post("/api/login", json={"name": "alice", "password": PASSWORD})
    assert login.status == 200
    client.session.cookie_jar.clear()
    again = Player("alice", (await login.json())["token"], alice.player_id, alice.village_id)
    assert (await _build(client, again)).status in (200, 409)  # rules may say no; not banned
    actions = [(e["action"], e["target"]) for e in await _audit(client, ops)]
    assert actions == [
        ("unban", f"player:{alice.player_id}"),
        ("ban", f"player:{alice.player_id}"),
    ]


async def _battle_report(db: AsyncEngine, player_id: int) -> int:
    result = resolve_battle({"legionnaire": 40}, {"praetorian": 25}, 2, "attack", 123456789)
    body, _ = battle_reports(
        result,
        loot={},
        attacker={"player_id": player_id},
        defender={"player_id": None},
        time_ms=1,
    )
    async with db.begin() as conn:
        found = await conn.execute(
            insert(Report)
            .values(
                player_id=player_id,
                kind="battle",
                title=body["title"],
                body=body,
                created_ms=1,
                is_read=False,
            )
            .returning(Report.id)
        )
        return int(found.scalar_one())


async def test_replay_of_a_battle_report_equals_the_stored_result(
    client: TestClient, ops: dict[str, str], register: RegisterFn, db: AsyncEngine
) -> None:
    alice = await register("alice")
    report_id = await _battle_report(db, alice.player_id)
    resp = await client.post(f"/admin/api/reports/{report_id}/replay", json={}, headers=ops)
    assert resp.status == 200, await resp.text()
    replay = await resp.json()
    assert replay["equal"] is True and replay["seed"] == "123456789"
    assert replay["replayed"] == replay["stored"]

    # a stored result that the seed does not give is told apart
    async with db.begin() as conn:
        body = (await conn.execute(select(Report.body).where(Report.id == report_id))).scalar_one()
        body["battle"]["attacker_losses"] = {"legionnaire": 0}
        await conn.execute(update(Report).where(Report.id == report_id).values(body=body))
    resp = await client.post(f"/admin/api/reports/{report_id}/replay", json={}, headers=ops)
    assert (await resp.json())["equal"] is False
    entries = await _audit(client, ops)
    assert [(e["action"], e["detail"]["equal"]) for e in entries] == [
        ("replay", False),
        ("replay", True),
    ]


async def test_village_timeline_has_processed_events_orders_and_marches(
    client: TestClient, ops: dict[str, str], register: RegisterFn, db: AsyncEngine
) -> None:
    alice, bob = await register("alice"), await register("bob")
    assert (await _build(client, alice)).status == 200
    # rows no console API makes: a processed event, and a march from bob to alice
    async with db.begin() as conn:
        await conn.execute(
            insert(ProcessedEvent).values(
                event_id=77, kind="build_done", village_id=alice.village_id, processed_ms=5
            )
        )
    await add_march(db, "attack", bob.village_id, alice.village_id, {"legionnaire": 3}, 10)
    resp = await client.get(f"/admin/api/villages/{alice.village_id}", headers=ops)
    assert resp.status == 200
    timeline = await resp.json()
    assert timeline["village"]["player_id"] == alice.player_id
    assert timeline["processed"] == [{"id": "77", "kind": "build_done", "processed_ms": 5}]
    [event] = timeline["events"]
    assert event["state"] == "pending" and event["kind"] == "build_done"
    assert timeline["game"]["orders"][0]["what"].startswith("woodcutter to level")
    [march] = timeline["game"]["marches"]
    assert march["direction"] == "in" and march["troops"] == {"legionnaire": 3}


async def test_two_operators_banning_at_once_both_succeed(
    client: TestClient, ops: dict[str, str], register: RegisterFn, db: AsyncEngine
) -> None:
    alice = await register("alice")
    path = f"/admin/api/players/{alice.player_id}/ban"
    answers = await asyncio.gather(
        *(client.post(path, json={"reason": f"r{i}"}, headers=ops) for i in range(4))
    )
    assert [a.status for a in answers] == [200] * 4
    async with db.connect() as conn:
        bans = (await conn.execute(select(PlayerBan.reason))).scalars().all()
    assert len(bans) == 1 and bans[0] in {"r0", "r1", "r2", "r3"}
    assert [e["action"] for e in await _audit(client, ops)] == ["ban"] * 4
