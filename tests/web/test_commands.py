"""The command extension point, shown with the test game's ``POST /api/test/spend``:
auth, validation, conditional spend, rule errors, idempotency, rate limit, events."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient
from pydantic import BaseModel
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from common.amounts import SCALE
from common.clock import ManualClock
from common.queue import EventQueue
from common.settings import Settings
from db.models import IdempotentResponse, ScheduledEvent
from tests.web.conftest import ON_BOTH_TOPOLOGIES, MakeClient, RegisterFn
from tests.web.helpers import set_wood, wood_fixed
from tests.web.minigame.commands import AFTER_COMMIT_LOG
from webfront import idempotency
from webfront.config import Limit

SPEND = "/api/test/spend"


@ON_BOTH_TOPOLOGIES
async def test_a_command_spends_bumps_the_snapshot_and_runs_hooks(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 500)
    etag = (await client.get("/api/snapshot", headers=alice.auth)).headers["ETag"]
    AFTER_COMMIT_LOG.clear()
    resp = await client.post(SPEND, json={"village_id": alice.village_id, "wood": 120},
                             headers=alice.auth)  # fmt: skip
    assert resp.status == 200
    assert await resp.json() == {"village_id": alice.village_id, "wood_left_fixed": 380 * SCALE}
    assert await wood_fixed(engine, alice.village_id) == 380 * SCALE
    assert [alice.village_id] == AFTER_COMMIT_LOG
    after = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
    assert after.status == 200
    assert (await after.json())["villages"][0]["stocks"]["wood"]["units"] == 380


async def test_touched_players_see_a_new_version_too(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice, bob = await register("Alice"), await register("Bob")
    await set_wood(engine, alice.village_id, 100)
    bob_etag = (await client.get("/api/snapshot", headers=bob.auth)).headers["ETag"]
    body = {"village_id": alice.village_id, "wood": 1, "notify_village_id": bob.village_id}
    assert (await client.post(SPEND, json=body, headers=alice.auth)).status == 200
    resp = await client.get("/api/snapshot", headers={**bob.auth, "If-None-Match": bob_etag})
    assert resp.status == 200


@ON_BOTH_TOPOLOGIES
async def test_scheduled_events_are_committed_and_indexed(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, redis: Redis,
    web_settings: Settings, clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 100)
    resp = await client.post(SPEND, json={"village_id": alice.village_id, "wood": 13},
                             headers=alice.auth)  # fmt: skip
    assert resp.status == 200
    async with engine.connect() as conn:
        row = (await conn.execute(select(ScheduledEvent.kind, ScheduledEvent.due_ms))).one()
    assert row.kind == "test.noop" and row.due_ms == clock.now_ms() + 60_000
    queue = EventQueue(redis, prefix=web_settings.redis_prefix,
                       partitions=web_settings.queue_partitions, clock=clock)  # fmt: skip
    stats = await queue.stats()
    assert sum(s.depth for s in stats) == 1


async def test_rule_errors_have_the_error_shape(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 10)
    resp = await client.post(SPEND, json={"village_id": alice.village_id, "wood": 11},
                             headers=alice.auth)  # fmt: skip
    assert resp.status == 409
    error = (await resp.json())["error"]
    assert error["code"] == "insufficient_resources" and error["details"] == {"needed": 11}
    assert await wood_fixed(engine, alice.village_id) == 10 * SCALE


@ON_BOTH_TOPOLOGIES
async def test_idempotent_replay_returns_the_first_answer_and_spends_once(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 100)
    headers = {**alice.auth, "Idempotency-Key": "order-1"}
    body = {"village_id": alice.village_id, "wood": 30}
    first = await client.post(SPEND, json=body, headers=headers)
    second = await client.post(SPEND, json={"wood": 30, "village_id": alice.village_id},
                               headers=headers)  # fmt: skip
    assert first.status == second.status == 200
    assert await first.json() == await second.json()
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert await wood_fixed(engine, alice.village_id) == 70 * SCALE
    other = await client.post(SPEND, json={**body, "wood": 31}, headers=headers)
    assert other.status == 422
    assert (await other.json())["error"]["code"] == "idempotency_key_reused"
    assert await wood_fixed(engine, alice.village_id) == 70 * SCALE
    # keys are per player: Bob may use the same one
    bob = await register("Bob")
    await set_wood(engine, bob.village_id, 100)
    resp = await client.post(SPEND, json={"village_id": bob.village_id, "wood": 30},
                             headers={**bob.auth, "Idempotency-Key": "order-1"})  # fmt: skip
    assert resp.status == 200 and "Idempotent-Replayed" not in resp.headers
    for bad_key in ("", "x" * 65, "with space", "ü"):
        resp = await client.post(SPEND, json=body,
                                 headers={**alice.auth, "Idempotency-Key": bad_key})  # fmt: skip
        assert resp.status == 400, bad_key
        assert (await resp.json())["error"]["code"] == "invalid_idempotency_key"


async def test_refused_commands_are_not_remembered(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 10)
    headers = {**alice.auth, "Idempotency-Key": "k"}
    body = {"village_id": alice.village_id, "wood": 20}
    assert (await client.post(SPEND, json=body, headers=headers)).status == 409
    await set_wood(engine, alice.village_id, 50)
    assert (await client.post(SPEND, json=body, headers=headers)).status == 200
    assert await wood_fixed(engine, alice.village_id) == 30 * SCALE


async def test_a_request_is_hashed_only_to_store_or_compare_its_answer(
    client: TestClient, register: RegisterFn, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal stores nothing and meets no stored answer: it takes no hash of its request
    (a repeat's comparison with the stored hash: the reuse test above)."""
    hashed: list[str] = []
    request_hash = idempotency.request_hash

    def counted(path: str, body: BaseModel) -> str:
        hashed.append(path)
        return request_hash(path, body)

    monkeypatch.setattr(idempotency, "request_hash", counted)
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 10)
    headers = {**alice.auth, "Idempotency-Key": "k"}
    body = {"village_id": alice.village_id, "wood": 20}
    assert (await client.post(SPEND, json=body, headers=headers)).status == 409
    assert hashed == []
    await set_wood(engine, alice.village_id, 50)
    assert (await client.post(SPEND, json=body, headers=headers)).status == 200
    assert hashed == [SPEND]  # stored with the answer


async def test_concurrent_spends_never_overspend(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 100)
    body = {"village_id": alice.village_id, "wood": 30}
    answers = await asyncio.gather(
        *(client.post(SPEND, json=body, headers=alice.auth) for _ in range(12))
    )
    statuses = sorted(r.status for r in answers)
    assert statuses.count(200) == 3 and statuses.count(409) == 9, statuses
    assert await wood_fixed(engine, alice.village_id) == 10 * SCALE


async def test_concurrent_requests_with_one_key_run_once(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 100)
    body = {"village_id": alice.village_id, "wood": 10}
    headers = {**alice.auth, "Idempotency-Key": "same"}
    answers = await asyncio.gather(*(client.post(SPEND, json=body, headers=headers)
                                     for _ in range(8)))  # fmt: skip
    assert {r.status for r in answers} == {200}
    assert len({await r.text() for r in answers}) == 1
    assert await wood_fixed(engine, alice.village_id) == 90 * SCALE
    async with engine.connect() as conn:
        stored = await conn.execute(select(func.count()).select_from(IdempotentResponse))
        assert stored.scalar() == 1


@ON_BOTH_TOPOLOGIES
async def test_commands_are_rate_limited_per_player(
    make_client: MakeClient, engine: AsyncEngine, clock: ManualClock
) -> None:
    client = await make_client(commands_per_player=Limit(3, 10_000))
    players = []
    for name in ("Alice", "Bob"):
        resp = await client.post("/api/register", json={"name": name, "password": "pw-long-enough"})
        players.append(await resp.json())
    client.session.cookie_jar.clear()
    alice, bob = ({"Authorization": f"Bearer {p['token']}"} for p in players)
    await set_wood(engine, players[0]["village_id"], 100)
    await set_wood(engine, players[1]["village_id"], 100)
    body = {"village_id": players[0]["village_id"], "wood": 1}
    for _ in range(3):
        assert (await client.post(SPEND, json=body, headers=alice)).status == 200
    resp = await client.post(SPEND, json=body, headers=alice)
    assert resp.status == 429 and 1 <= int(resp.headers["Retry-After"]) <= 10
    assert (await resp.json())["error"]["code"] == "rate_limited"
    assert await wood_fixed(engine, players[0]["village_id"]) == 97 * SCALE
    bob_body = {"village_id": players[1]["village_id"], "wood": 1}
    assert (await client.post(SPEND, json=bob_body, headers=bob)).status == 200
    await clock.advance(10_000)
    assert (await client.post(SPEND, json=body, headers=alice)).status == 200
