"""Register, login, logout, expiry, forged tokens and the login rate limit."""

from __future__ import annotations

import logging

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.settings import Settings
from db.models import Player, PlayerSession, Village
from refgame.models import Building
from refgame.resources import STOCKS
from tests.web.conftest import ON_BOTH_TOPOLOGIES, PASSWORD, MakeClient, RegisterFn
from webfront import keys
from webfront.auth import SessionOut
from webfront.sessions import COOKIE, token_hash


async def test_register_creates_player_village_and_session(
    client: TestClient, engine: AsyncEngine, web_settings: Settings
) -> None:
    resp = await client.post("/api/register", json={"name": "Alice", "password": PASSWORD})
    assert resp.status == 201
    data = await resp.json()
    SessionOut.model_validate(data)
    cookie = resp.cookies[COOKIE]
    assert cookie.value == data["token"]
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
    async with engine.connect() as conn:
        player = (await conn.execute(select(Player.name, Player.password_hash))).one()
        assert player.name == "Alice"
        stored = player.password_hash
        assert stored.startswith("$argon2id$") and PASSWORD not in stored
        village = (await conn.execute(select(Village.id, Village.player_id, Village.x))).one()
        assert village.id == data["village_id"] and village.player_id == data["player_id"]
        assert abs(village.x) <= web_settings.map_radius
        assert (await conn.execute(select(func.count()).select_from(STOCKS.table))).scalar() == 1
        assert (await conn.execute(select(func.count()).select_from(Building))).scalar_one() > 0
        stored = (await conn.execute(select(PlayerSession.token_hash))).scalar_one()
    assert stored == token_hash(data["token"]) and stored != data["token"]


async def test_register_same_name_is_409(client: TestClient, register: RegisterFn) -> None:
    await register("Bob")
    resp = await client.post("/api/register", json={"name": "Bob", "password": PASSWORD})
    assert resp.status == 409
    assert (await resp.json())["error"]["code"] == "name_taken"


@ON_BOTH_TOPOLOGIES
async def test_login_gives_a_new_token_each_time(client: TestClient, register: RegisterFn) -> None:
    first = await register("Carol")
    tokens = set()
    for _ in range(2):
        resp = await client.post("/api/login", json={"name": "Carol", "password": PASSWORD})
        assert resp.status == 200
        data = await resp.json()
        assert data["player_id"] == first.player_id
        tokens.add(data["token"])
    assert len(tokens | {first.token}) == 3
    for token in tokens:
        resp = await client.get("/api/snapshot", headers={"Authorization": f"Bearer {token}"})
        assert resp.status == 200


async def test_wrong_password_and_unknown_name_look_the_same(
    client: TestClient, register: RegisterFn
) -> None:
    await register("Dave")
    wrong = await client.post("/api/login", json={"name": "Dave", "password": "not the one"})
    unknown = await client.post("/api/login", json={"name": "Nobody", "password": PASSWORD})
    assert wrong.status == unknown.status == 401
    assert (await wrong.json()) == (await unknown.json())
    assert (await wrong.json())["error"]["code"] == "invalid_credentials"


@ON_BOTH_TOPOLOGIES
async def test_logout_revokes_the_token_everywhere(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings
) -> None:
    player = await register("Erin")
    assert (await client.get("/api/snapshot", headers=player.auth)).status == 200
    resp = await client.post(
        "/api/logout", headers={**player.auth, "Content-Type": "application/json"}
    )
    assert resp.status == 200
    assert resp.cookies[COOKIE]["max-age"] == "0"
    for path in ("/api/snapshot", "/api/reports", "/api/map?x=0&y=0"):
        resp = await client.get(path, headers=player.auth)
        assert resp.status == 401, path
    # even with the Redis cache gone, the database says revoked
    await redis.delete(keys.session(web_settings.redis_prefix, token_hash(player.token)))
    assert (await client.get("/api/snapshot", headers=player.auth)).status == 401


async def test_cookie_session_works_like_a_bearer_token(
    client: TestClient, register: RegisterFn
) -> None:
    player = await register("Frank")
    resp = await client.get("/api/snapshot", headers={"Cookie": f"{COOKIE}={player.token}"})
    assert resp.status == 200
    assert (await resp.json())["player_id"] == player.player_id


@ON_BOTH_TOPOLOGIES
async def test_sessions_expire(
    client: TestClient, register: RegisterFn, clock: ManualClock, web_settings: Settings,
    redis: Redis,
) -> None:  # fmt: skip
    player = await register("Grace")
    await clock.advance(web_settings.session_ttl_s * 1000 - 1)
    assert (await client.get("/api/snapshot", headers=player.auth)).status == 200
    await clock.advance(1)
    assert (await client.get("/api/snapshot", headers=player.auth)).status == 401
    assert (await client.get("/api/reports", headers=player.auth)).status == 401
    # and from the database too, when the cache is cold
    await redis.delete(keys.session(web_settings.redis_prefix, token_hash(player.token)))
    assert (await client.get("/api/snapshot", headers=player.auth)).status == 401


async def test_forged_and_malformed_tokens_are_401(
    client: TestClient, register: RegisterFn
) -> None:
    player = await register("Heidi")
    forged = player.token[:-1] + ("A" if player.token[-1] != "A" else "B")
    for headers in (
        {},
        {"Authorization": f"Bearer {forged}"},
        {"Authorization": "Bearer x"},
        {"Authorization": f"Basic {player.token}"},
        {"Authorization": "Bearer " + "é" * 43},
        {"Cookie": f"{COOKIE}={forged}"},
        {"Cookie": "other=1"},
    ):
        for path in ("/api/snapshot", "/api/reports", "/api/map?x=0&y=0"):
            resp = await client.get(path, headers=headers)
            assert resp.status == 401, (path, headers)
            body = await resp.json()
            assert body["error"]["code"] == "unauthorized"


@ON_BOTH_TOPOLOGIES
async def test_login_rate_limit_per_account(make_client: MakeClient, clock: ManualClock) -> None:
    from webfront.config import Limit

    client = await make_client(login_per_account=Limit(3, 60_000))
    resp = await client.post("/api/register", json={"name": "Ivan", "password": PASSWORD})
    assert resp.status == 201
    for _ in range(3):
        resp = await client.post("/api/login", json={"name": "Ivan", "password": "wrong-guess"})
        assert resp.status == 401
    resp = await client.post("/api/login", json={"name": "Ivan", "password": PASSWORD})
    assert resp.status == 429
    assert (await resp.json())["error"]["code"] == "too_many_attempts"
    retry_after = int(resp.headers["Retry-After"])
    assert 1 <= retry_after <= 60
    # other accounts are not affected by this account's limit
    resp = await client.post("/api/login", json={"name": "Judy", "password": PASSWORD})
    assert resp.status == 401
    await clock.advance(retry_after * 1000)
    resp = await client.post("/api/login", json={"name": "Ivan", "password": PASSWORD})
    assert resp.status == 200


@ON_BOTH_TOPOLOGIES
async def test_login_rate_limit_per_address(make_client: MakeClient) -> None:
    from webfront.config import Limit

    client = await make_client(login_per_address=Limit(4, 60_000))
    for i in range(4):
        resp = await client.post("/api/login", json={"name": f"user{i}", "password": PASSWORD})
        assert resp.status == 401
    resp = await client.post("/api/login", json={"name": "user9", "password": PASSWORD})
    assert resp.status == 429 and "Retry-After" in resp.headers


async def test_a_corrupt_stored_hash_is_a_wrong_password_and_a_warning(
    client: TestClient,
    register: RegisterFn,
    engine: AsyncEngine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A hash damaged in the players table used to answer 500 (scrypt refusing its
    parameters): it matches no password, answers the usual 401 and tells the operator which
    player, never the hash."""
    player = await register("Hank")
    async with engine.connect() as conn:
        good = (await conn.execute(select(Player.password_hash))).scalar_one()
    _, scheme, version, costs, salt, key = good.split("$")
    corrupt = [
        f"$argon2id${version}$m=3,t=1,p=1${salt}${key}",  # under Argon2's least memory
        f"$argon2id${version}$m=256,t=0,p=1${salt}${key}",
        f"$argon2id${version}$m={2**30},t=1,p=1${salt}${key}",  # a planted cost: 1 TiB
        f"$argon2id${version}$m=256,t={2**20},p=1${salt}${key}",
        f"$argon2d${version}${costs}${salt}${key}",
        f"${scheme}${version}${costs}${salt}$!!not-base64",
        f"${scheme}${version}${costs}${salt}${key[:10]}",  # a key cut short
        f"${scheme}${version}$m=x,t=1,p=1${salt}${key}",
        f"${scheme}${version}${costs}${salt}",
        f"scrypt$3$8$1${salt}${key}",  # the earlier scheme's: N not a power of two
        f"scrypt${2**30}$8$1${salt}${key}",  # a planted cost: 1 TiB of memory
        "",
    ]
    for stored in corrupt:
        async with engine.begin() as conn:
            await conn.execute(update(Player).values(password_hash=stored))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="webfront.auth"):
            resp = await client.post("/api/login", json={"name": "Hank", "password": PASSWORD})
        assert resp.status == 401, stored
        assert (await resp.json())["error"]["code"] == "invalid_credentials"
        [record] = [r for r in caplog.records if r.name == "webfront.auth"]
        message = record.getMessage()
        assert f"player {player.player_id} cannot log in" in message and "unusable" in message
        assert salt not in message and key[:10] not in message, message
    # the real hash back: the same password logs in
    async with engine.begin() as conn:
        await conn.execute(update(Player).values(password_hash=good))
    resp = await client.post("/api/login", json={"name": "Hank", "password": PASSWORD})
    assert resp.status == 200


async def test_a_short_password_at_login_is_a_wrong_password(
    client: TestClient, register: RegisterFn
) -> None:
    await register("Erin")
    short = await client.post("/api/login", json={"name": "Erin", "password": "short"})
    assert short.status == 401
    assert (await short.json())["error"] == {
        "code": "invalid_credentials",
        "message": "wrong name or password",
    }
    empty = await client.post("/api/login", json={"name": "Erin", "password": ""})
    assert empty.status == 401
    # registration still applies its rules
    resp = await client.post("/api/register", json={"name": "Frank", "password": "short"})
    assert resp.status == 422
