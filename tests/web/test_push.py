"""``GET /api/events``: the per-player event stream, on a real app and real Redis.

Bumps and alerts of committed commands arrive on their player's stream only; errors
before the stream have the JSON shape; the channel limit answers 503; a client that
leaves is cleaned up; a lost subscription is re-made and its streams told to resync.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.world.stack import Processes
from common.clock import ManualClock
from common.embedded_redis import free_port
from common.settings import Settings
from tests.web.conftest import FAST_CONFIG, PASSWORD, Player
from tests.web.helpers import set_wood
from webfront.app import create_app
from webfront.push import PUSH, PUSH_CONFIG, PushConfig, PushHub

SPEND = "/api/test/spend"
EVENTS = "/api/events"
DEADLINE_S = 10.0
QUICK = PushConfig(heartbeat_s=0.05, retry_min_s=0.01, retry_max_s=0.05)

StartFn = Callable[..., Awaitable[TestClient]]


@pytest.fixture
def start(aiohttp_client: Any, web_settings: Settings, clock: ManualClock) -> StartFn:
    """``await start(**settings_changes)``: a client of a fresh app whose hub is subscribed."""

    async def make(**changes: Any) -> TestClient:
        settings = web_settings.model_copy(update=changes)
        app = create_app(settings, clock, config=FAST_CONFIG)
        app[PUSH_CONFIG] = QUICK
        client: TestClient = await aiohttp_client(app)
        await asyncio.wait_for(hub(client).subscribed.wait(), DEADLINE_S)
        return client

    return make


def hub(client: TestClient) -> PushHub:
    app: web.Application = client.app  # type: ignore[assignment]
    return app[PUSH]


async def register(client: TestClient, name: str) -> Player:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return Player(name, data["token"], data["player_id"], data["village_id"])


class Stream:
    """A test's reader of one event stream: the events, comments skipped."""

    def __init__(self, resp: ClientResponse) -> None:
        self.resp = resp

    async def next(self) -> tuple[str, Any]:
        """The next event as (name, parsed data)."""
        name, data = "message", ""
        async with asyncio.timeout(DEADLINE_S):
            while True:
                line = (await self.resp.content.readline()).decode()
                assert line, "the stream ended"
                line = line.rstrip("\n")
                if line == "":
                    if data:
                        return name, json.loads(data)
                    continue
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "event":
                    name = value
                elif field == "data":
                    data += value


async def stream_of(client: TestClient, player: Player) -> tuple[Stream, ClientResponse]:
    resp = await client.get(EVENTS, headers=player.auth)
    assert resp.status == 200, await resp.text()
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    return Stream(resp), resp


async def spend(client: TestClient, player: Player, **extra: int) -> None:
    body = {"village_id": player.village_id, "wood": 1, **extra}
    resp = await client.post(SPEND, json=body, headers=player.auth)
    assert resp.status == 200, await resp.text()


async def etag(client: TestClient, player: Player) -> str:
    return (await client.get("/api/snapshot", headers=player.auth)).headers["ETag"]


async def test_a_commands_bump_reaches_its_player_and_no_one_else(
    start: StartFn, engine: AsyncEngine
) -> None:
    client = await start()
    alice, bob = await register(client, "Alice"), await register(client, "Bob")
    await set_wood(engine, alice.village_id, 100)
    await set_wood(engine, bob.village_id, 100)
    alice_stream, a = await stream_of(client, alice)
    bob_stream, b = await stream_of(client, bob)
    await spend(client, alice)
    assert await alice_stream.next() == (
        "version",
        {"version": int((await etag(client, alice)).strip('"'))},
    )
    # Bob's first event is his own change, so Alice's went to no stream of his
    await spend(client, bob)
    assert await bob_stream.next() == (
        "version",
        {"version": int((await etag(client, bob)).strip('"'))},
    )
    a.close()
    b.close()


async def test_an_alert_reaches_the_player_it_names(start: StartFn, engine: AsyncEngine) -> None:
    client = await start()
    alice, bob = await register(client, "Alice"), await register(client, "Bob")
    await set_wood(engine, alice.village_id, 100)
    bob_stream, b = await stream_of(client, bob)
    await spend(client, alice, notify_village_id=bob.village_id, wood=7)
    name, _ = await bob_stream.next()
    assert name == "version"  # his snapshot changed (touch_players) ...
    assert await bob_stream.next() == ("alert", {"kind": "test_alert", "data": {"wood": 7}})
    b.close()


async def test_errors_before_the_stream_have_the_json_shape(start: StartFn) -> None:
    client = await start(push_max_channels=1)
    resp = await client.get(EVENTS)
    assert resp.status == 401
    assert (await resp.json())["error"]["code"] == "unauthorized"
    resp = await client.get(EVENTS, headers={"Authorization": "Bearer nonsense"})
    assert resp.status == 401
    assert (await resp.json())["error"]["code"] == "unauthorized"
    alice = await register(client, "Alice")
    _, first = await stream_of(client, alice)
    full = await client.get(EVENTS, headers=alice.auth)
    assert full.status == 503
    assert (await full.json())["error"]["code"] == "unavailable"
    assert full.headers["Retry-After"] == "30"
    first.close()


async def test_a_client_that_leaves_is_cleaned_up(start: StartFn) -> None:
    client = await start()
    alice = await register(client, "Alice")
    pushes = hub(client)
    streams = [await stream_of(client, alice) for _ in range(3)]
    assert pushes.count == 3 and len(pushes.channels[alice.player_id]) == 3
    for _, resp in streams:
        resp.close()
    async with pushes.changed:
        await asyncio.wait_for(pushes.changed.wait_for(lambda: pushes.count == 0), DEADLINE_S)
    assert pushes.channels == {}


async def test_a_lost_subscription_is_remade_and_streams_resync(
    start: StartFn, redis: Redis, web_settings: Settings, engine: AsyncEngine
) -> None:
    client = await start()
    alice = await register(client, "Alice")
    await set_wood(engine, alice.village_id, 100)
    stream, resp = await stream_of(client, alice)
    name = f"{web_settings.redis_prefix}:push"
    ids = [c["id"] for c in await redis.client_list() if c.get("name") == name]
    assert len(ids) == 1  # one subscription for the process, whatever the streams
    await redis.execute_command("CLIENT", "KILL", "ID", ids[0])
    assert await stream.next() == ("resync", {})
    await spend(client, alice)  # and the new subscription delivers
    assert (await stream.next())[0] == "version"
    resp.close()


async def test_a_stream_that_has_not_started_holds_its_messages_within_the_budget() -> None:
    pushes = PushHub("redis://unused", "unused", 10, replace(QUICK, buffer_bytes=50))
    slow, other = pushes.open(1), pushes.open(2)  # never started: what comes waits
    pushes.deliver(b"v 2:1")
    for version in range(3):  # 37 bytes each: the third finds 74 waiting
        pushes.deliver(b"v 1:%d" % version)
    assert slow.ended.is_set() and not slow.pending
    assert not other.ended.is_set() and other.pending == [
        b'event: version\ndata: {"version":1}\n\n'
    ]
    assert pushes.dropped == 1


async def test_a_client_that_stops_reading_is_dropped_and_the_others_go_on(
    start: StartFn, engine: AsyncEngine
) -> None:
    client = await start()
    alice, bob = await register(client, "Alice"), await register(client, "Bob")
    await set_wood(engine, alice.village_id, 100)
    pushes = hub(client)
    alice_stream, a = await stream_of(client, alice)
    _, b = await stream_of(client, bob)  # Bob never reads: the socket's buffers fill
    big = json.dumps([[bob.player_id, "news", {"text": "x" * 1_000_000}]]).encode()
    for _ in range(200):  # far more than the kernel's buffers hold
        pushes.deliver(b"a " + big)
        if pushes.dropped:
            break
    assert pushes.dropped == 1
    assert [c.player_id for held in pushes.channels.values() for c in held if c.ended.is_set()] in (
        [bob.player_id],
        [],  # Bob's handler already returned and closed its channel
    )
    await spend(client, alice)  # Alice's stream goes on
    assert (await alice_stream.next())[0] == "version"
    async with pushes.changed:
        await asyncio.wait_for(pushes.changed.wait_for(lambda: pushes.count == 1), DEADLINE_S)
    # an operator sees it: the open streams and the drops are in the metrics
    metrics = await (await client.get("/metrics")).text()
    assert "\nwebfront_push_streams 1.0\n" in metrics
    assert "\nwebfront_push_dropped_total 1.0\n" in metrics
    a.close()
    b.close()


async def test_the_world_bench_reads_the_drops_from_the_metrics(start: StartFn) -> None:
    web = Processes({}, web_workers=1, task_servers=0)
    # as the bench runs it: behind a trusted proxy on 127.0.0.1, so only the token reads
    client = await start(trusted_proxies="127.0.0.1", web_metrics_token=web.metrics_token)
    assert (await client.get("/metrics")).status == 404
    web.url = f"http://127.0.0.1:{client.server.port}"
    assert await asyncio.to_thread(web.streams_dropped) == 0
    hub(client).dropped = 3  # as three slow clients would
    assert await asyncio.to_thread(web.streams_dropped) == 3
    web.web_workers = 2  # a scrape reaches one worker of several: no figure
    assert web.streams_dropped() is None
    web.web_workers, web.url = 1, f"http://127.0.0.1:{free_port()}"  # nobody answers
    assert await asyncio.to_thread(web.streams_dropped) is None


async def test_an_idle_stream_gets_heartbeats(start: StartFn) -> None:
    client = await start()
    alice = await register(client, "Alice")
    _, resp = await stream_of(client, alice)
    seen = b""
    async with asyncio.timeout(DEADLINE_S):
        while seen.count(b": keep-alive\n\n") < 2:  # QUICK beats every 0.05 s
            seen += await resp.content.readany()
    assert seen.startswith(b"retry: 5000\n: connected\n\n")
    resp.close()


async def test_a_closed_stream_leaves_the_heartbeat_schedule() -> None:
    pushes = PushHub("redis://unused", "unused", 10, QUICK)  # never connects
    kept, closed = pushes.open(1), pushes.open(2)
    await pushes.close(closed)
    assert closed.ended.is_set() and pushes.count == 1
    for _ in range(3 * round(QUICK.heartbeat_s / pushes.sweep_s)):  # each due twice at least
        pushes.sweep()
    assert [c for due in pushes.beats.values() for c in due] == [kept]


async def test_a_malformed_message_reaches_no_stream() -> None:
    pushes = PushHub("redis://unused", "unused", 10, QUICK)  # never connects
    channel = pushes.open(1)
    for data in (b"v 1:12\nevent: evil", b"v 1:1x", b"v x:1", b"a [[1]]", b"a {", b"zzz"):
        pushes._deliver_safely(data)
    assert not channel.pending
    pushes.deliver(b"v 1:12")
    assert channel.pending == [b'event: version\ndata: {"version":12}\n\n']
