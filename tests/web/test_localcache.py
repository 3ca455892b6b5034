"""Sessions and versions remembered in process, kept true by Redis's client-side caching pushes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from common.clock import ManualClock
from common.fastredis import _Protocol
from common.settings import Settings
from common.snapshot_versions import bump_versions
from tests.waiting import wait_for
from tests.web.conftest import JSON_HEADERS, PASSWORD, MakeClient, Player, RegisterFn
from tests.web.helpers import session_pushed, version_pushed
from webfront.localcache import LocalCache
from webfront.sessions import token_hash
from webfront.snapshot import SNAPSHOTS
from webfront.state import FAST_REDIS, LOCAL_CACHE


def count_redis_polls(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-element list counting the snapshot polls that went to Redis."""
    fast = client.app[FAST_REDIS]
    real = fast.evalsha
    calls = [0]

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(fast, "evalsha", counting)
    return calls


async def warm(client: TestClient, auth: dict[str, str]) -> Any:
    """Two polls: a new player's first one creates the version (it is remembered next time)."""
    await client.get("/api/snapshot", headers=auth)
    return await client.get("/api/snapshot", headers=auth)


async def test_a_remembered_poll_asks_redis_nothing(
    client: TestClient, register: RegisterFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = await register("Alice")
    first = await warm(client, alice.auth)
    etag = first.headers["ETag"]
    assert client.app[LOCAL_CACHE].active
    polls = count_redis_polls(client, monkeypatch)
    for _ in range(3):
        resp = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
        assert resp.status == 304 and resp.headers["ETag"] == etag
        full = await client.get("/api/snapshot", headers=alice.auth)
        assert full.status == 200 and full.headers["ETag"] == etag
        assert (await full.json())["villages"] == (await first.json())["villages"]
    assert polls[0] == 0


async def test_without_the_local_cache_every_poll_asks_redis(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await make_client(local_cache=False)
    resp = await client.post("/api/register", json={"name": "Alice", "password": PASSWORD})
    auth = {"Authorization": f"Bearer {(await resp.json())['token']}"}
    client.session.cookie_jar.clear()
    etag = (await client.get("/api/snapshot", headers=auth)).headers["ETag"]
    polls = count_redis_polls(client, monkeypatch)
    for _ in range(3):
        resp = await client.get("/api/snapshot", headers={**auth, "If-None-Match": etag})
        assert resp.status == 304
    assert polls[0] == 3 and not client.app[LOCAL_CACHE].active


async def test_a_version_bumped_by_another_process_is_seen_by_the_next_poll(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings,
    clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    etag = (await warm(client, alice.auth)).headers["ETag"]
    held = {**alice.auth, "If-None-Match": etag}
    assert (await client.get("/api/snapshot", headers=held)).status == 304
    assert alice.player_id in client.app[LOCAL_CACHE].versions
    for _ in range(5):  # the bump comes over another connection, as the task server's do
        await clock.advance(1)
        await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
        await version_pushed(client, alice.player_id)
        resp = await client.get("/api/snapshot", headers=held)
        assert resp.status == 200 and resp.headers["ETag"] != held["If-None-Match"]
        held["If-None-Match"] = resp.headers["ETag"]
        assert (await client.get("/api/snapshot", headers=held)).status == 304


async def test_a_command_shows_in_the_next_poll_of_its_process(
    client: TestClient, register: RegisterFn
) -> None:
    alice = await register("Alice")
    etag = (await warm(client, alice.auth)).headers["ETag"]
    assert alice.player_id in client.app[LOCAL_CACHE].versions
    body = {"village_id": alice.village_id, "wood": 5}
    resp = await client.post("/api/test/spend", json=body, headers={**alice.auth, **JSON_HEADERS})
    assert resp.status == 200, await resp.text()
    after = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
    assert after.status == 200 and after.headers["ETag"] != etag


async def login(client: TestClient, name: str) -> dict[str, str]:
    resp = await client.post("/api/login", json={"name": name, "password": PASSWORD})
    assert resp.status == 200
    client.session.cookie_jar.clear()
    return {"Authorization": f"Bearer {(await resp.json())['token']}"}


async def test_logout_forgets_the_session_in_its_own_process_at_once(
    client: TestClient, register: RegisterFn
) -> None:
    alice = await register("Alice")
    assert (await client.get("/api/snapshot", headers=alice.auth)).status == 200
    digest = token_hash(alice.token)
    assert digest in client.app[LOCAL_CACHE].sessions
    resp = await client.post("/api/logout", headers={**alice.auth, **JSON_HEADERS})
    assert resp.status == 200
    assert digest not in client.app[LOCAL_CACHE].sessions
    for path in ("/api/snapshot", "/api/reports"):
        assert (await client.get(path, headers=alice.auth)).status == 401


async def test_logout_on_one_process_revokes_the_session_on_another(
    make_client: MakeClient, register: RegisterFn
) -> None:
    first, other = await make_client(), await make_client()  # one Redis, one database
    alice: Player = await register("Alice")
    auth = await login(other, "Alice")
    for client in (first, other):  # both remember the session now
        assert (await client.get("/api/snapshot", headers=auth)).status == 200
        assert (await client.get("/api/reports", headers=auth)).status == 200
    digest = token_hash(auth["Authorization"].removeprefix("Bearer "))
    assert digest in other.app[LOCAL_CACHE].sessions
    resp = await first.post("/api/logout", headers={**auth, **JSON_HEADERS})
    assert resp.status == 200
    await session_pushed(other, digest)  # the other process forgets it on Redis's push
    for path in ("/api/snapshot", "/api/reports"):
        assert (await other.get(path, headers=auth)).status == 401, path
    assert (await other.get("/api/snapshot", headers=alice.auth)).status == 200  # others stay


async def test_a_lost_connection_forgets_everything_and_tracking_resumes(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings,
    clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    etag = (await warm(client, alice.auth)).headers["ETag"]
    local = client.app[LOCAL_CACHE]
    assert local.active and local.sessions and local.versions
    await redis.client_kill_filter(_id=await client.app[FAST_REDIS].execute("CLIENT", "ID"))
    await wait_for(lambda: not local.active, "the local cache to stop")
    assert not local.sessions and not local.versions
    # a change while no push can reach us
    await clock.advance(1)
    await bump_versions(redis, web_settings.redis_prefix, [alice.player_id], clock.now_ms())
    resp = await client.get("/api/snapshot", headers={**alice.auth, "If-None-Match": etag})
    assert resp.status == 200 and resp.headers["ETag"] != etag
    assert local.active and alice.player_id in local.versions  # reconnected, tracking again


async def test_bodies_are_kept_per_version(
    client: TestClient, register: RegisterFn, redis: Redis, web_settings: Settings,
    clock: ManualClock,
) -> None:  # fmt: skip
    alice = await register("Alice")
    etag = (await client.get("/api/snapshot", headers=alice.auth)).headers["ETag"]
    service = client.app[SNAPSHOTS]
    version = etag.strip('"')
    assert service.local.body(alice.player_id, version, False) is not None
    assert service.local.body(alice.player_id, str(int(version) + 1), False) is None
    assert service.local.body(alice.player_id, version, True) is None  # msgpack: not built yet


# ---- the cache itself


def make_cache(max_entries: int = 100, max_age_ms: int = 1_000) -> LocalCache:
    cache = LocalCache("p:sess:", "p:snapver:", max_entries=max_entries, max_age_ms=max_age_ms)
    cache.tracking_started()
    return cache


def test_entries_live_at_most_max_age_and_sessions_until_they_expire() -> None:
    cache = make_cache(max_age_ms=1_000)
    cache.fill_session("d1", b"7:5000", now_ms=100)
    cache.fill_version(7, [b"42"], False, now_ms=100)
    assert cache.player("d1", 1_099) == 7 and cache.version(7, 1_099) == "42"
    assert cache.player("d1", 1_100) is None and cache.version(7, 1_100) is None
    cache.fill_session("d2", b"8:2000", now_ms=1_500)
    assert cache.player("d2", 1_999) == 8 and cache.player("d2", 2_000) is None


def test_revoked_unknown_and_expired_sessions_are_not_remembered() -> None:
    cache = make_cache()
    assert not cache.fill_session("d", b"-", now_ms=0)
    assert not cache.fill_session("d", None, now_ms=0)
    assert not cache.fill_session("d", b"7:100", now_ms=100)
    cache.fill_version(7, [], False, now_ms=0)
    assert not cache.sessions and not cache.versions


def test_nothing_is_remembered_while_tracking_is_off() -> None:
    cache = LocalCache("p:sess:", "p:snapver:", max_entries=10, max_age_ms=1_000)
    cache.fill_session("d", b"7:5000", now_ms=0)
    cache.fill_version(7, [b"42", b"{}"], False, now_ms=0)
    assert cache.player("d", 1) is None and cache.version(7, 1) is None
    assert cache.body(7, "42", False) == b"{}"  # bodies are immutable per version
    cache.tracking_started()
    cache.fill_session("d", b"7:5000", now_ms=0)
    cache.fill_version(7, [b"42", b"{}"], False, now_ms=0)
    assert cache.player("d", 1) == 7 and cache.body(7, "42", False) == b"{}"
    cache.tracking_lost()
    assert cache.player("d", 1) is None and cache.version(7, 1) is None


def test_pushes_forget_their_keys_and_a_flush_forgets_all() -> None:
    cache = make_cache()
    for i in range(3):
        cache.fill_session(f"d{i}", b"%d:5000" % i, now_ms=0)
        cache.fill_version(i, [b"1"], False, now_ms=0)
    cache.invalidate([b"p:snapver:{0}", b"p:sess:d1", b"other:key", b"p:snapver:{x}"])
    assert cache.version(0, 1) is None and cache.version(1, 1) == "1"
    assert cache.player("d1", 1) is None and cache.player("d0", 1) == 0
    cache.invalidate(None)
    assert not cache.sessions and not cache.versions


def test_tables_are_bounded_oldest_first() -> None:
    cache = LocalCache("p:sess:", "p:snapver:", max_entries=3, max_age_ms=1_000, max_bodies=2)
    cache.tracking_started()
    for i in range(5):
        cache.fill_session(f"d{i}", b"%d:5000" % i, now_ms=0)
        cache.put_body(i, "1", False, b"{}")
    assert list(cache.sessions) == ["d2", "d3", "d4"]
    assert list(cache.bodies) == [(3, False), (4, False)] and cache.body(2, "1", False) is None


async def test_a_reply_read_before_a_change_is_forgotten_by_the_change() -> None:
    """Redis sends a change's push after every reply that read the old value, on the same
    connection; the fill runs as the reply is parsed, so the push that follows undoes it."""
    cache = make_cache()
    protocol = _Protocol()
    protocol.tracker = cache
    waiter = asyncio.get_running_loop().create_future()
    protocol.waiters.append((waiter, lambda r: cache.fill_version(7, r, False, now_ms=0)))
    reply = b"*1\r\n$2\r\n41\r\n"
    push = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$13\r\np:snapver:{7}\r\n"
    protocol.data_received(reply + push)  # one read holds both
    assert waiter.result() == [b"41"]
    assert cache.version(7, 1) is None
