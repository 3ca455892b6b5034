"""How many PostgreSQL round trips the task server spends on an order's completion (a
regression guard, as ``test_command_round_trips`` is for the commands).

Builds and trainings are most of a world's events, and each statement of their batch is a
wait on the task server's loop and work for PostgreSQL. Counted on every engine of the
process: SQLAlchemy's statements (``before_cursor_execute``) and what asyncpg sends by
itself (BEGIN, COMMIT, and the statements run on ``db.driver``), from its query logger.
Before the handlers took the owner with the order and changed rates without reading the
stock first, a build's batch made 10, a training's 9; before they were set-based, a batch
of n builds or trainings made 4 + 3n, where now it makes 7 whatever n.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool

from common.clock import ManualClock
from common.queue.events import Event
from common.queue.gathered import Ran
from common.queue.handlers import Registration
from common.settings import Settings
from gameapi import handler_registry, load_game
from gameserver.config import TaskServerConfig
from gameserver.taskserver import TaskServer
from refgame.handlers import BUILD_DONE
from tests.queue.conftest import eventually
from tests.refgame.test_command_round_trips import RoundTrips, _player
from tests.refgame.test_command_round_trips import pg_settings as pg_settings  # the fixture
from tests.web.conftest import FAST_CONFIG
from webfront.app import create_app

# the order check (before the transaction), BEGIN, the events taken, the order taken with
# its village's owner, the building's level set (its old one back) or the troops added,
# the rates changed, COMMIT; lower these when a change saves a round trip
MAX_BUILD_DONE = 7
MAX_TRAIN_DONE = 7


@contextmanager
def _counting() -> Iterator[RoundTrips]:
    trips = RoundTrips()

    def on_connection(dbapi_connection: Any, *_: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(trips.driver_query)

    hooks = [
        (Engine, "before_cursor_execute", trips.statement),
        (Pool, "connect", on_connection),
        (Pool, "checkout", on_connection),
    ]
    for target, name, hook in hooks:
        event.listen(target, name, hook)
    try:
        yield trips
    finally:
        for target, name, hook in hooks:
            event.remove(target, name, hook)


def _batch(sent: list[str], table: str) -> list[str]:
    """The statements of the batch that took an order from ``table``: the order check
    right before its transaction (the world's head and the village's earlier events in
    one statement, no read before it), and the transaction."""
    taken = next(i for i, s in enumerate(sent) if s.startswith(f"DELETE FROM {table} "))
    begin = max(i for i in range(taken) if sent[i].startswith("BEGIN"))
    commit = next(i for i in range(taken, len(sent)) if sent[i].startswith("COMMIT"))
    assert sent[begin - 1].startswith("SELECT true AS is_head"), sent[begin - 1 :]
    assert not sent[begin - 2].startswith("SELECT scheduled_events.id"), sent[begin - 2 :]
    return sent[begin - 1 : commit + 1]


async def test_an_order_completes_in_few_round_trips(
    aiohttp_client: Any, pg_settings: Settings, redis: Redis
) -> None:
    clock = ManualClock(1_750_000_000_000)
    client = await aiohttp_client(create_app(pg_settings, clock, config=replace(FAST_CONFIG)))
    auth, village = await _player(client, "alice")
    registry = handler_registry(load_game(pg_settings.game), pg_settings)
    before = await _village(client, auth)
    sent = []
    for path, body in (
        ("/api/build", {"village_id": village, "kind": "woodcutter"}),
        ("/api/train", {"village_id": village, "unit": "legionnaire", "count": 1}),
    ):
        resp = await client.post(path, json=body, headers={**auth, "Idempotency-Key": path[5:]})
        assert resp.status == 200, await resp.text()
        await clock.advance(6 * 3_600_000)  # due
        with _counting() as trips:
            await TaskServer(pg_settings, registry, clock, burst=True).run()
        sent.extend(trips.sent)
    build = _batch(sent, "build_orders")
    assert len(build) <= MAX_BUILD_DONE, "\n".join(build)
    train = _batch(sent, "training_orders")
    assert len(train) <= MAX_TRAIN_DONE, train
    # the owner comes with the order, the rates change without a read of the stock
    for batch in (build, train):
        assert not any(s.startswith(("SELECT villages", "SELECT village_stock")) for s in batch)
    after = await _village(client, auth)
    assert after["buildings"]["woodcutter"] == before["buildings"]["woodcutter"] + 1
    assert after["troops"]["legionnaire"] == before["troops"].get("legionnaire", 0) + 1
    rate = "rate_per_hour"
    assert after["stocks"]["wood"][rate] > before["stocks"]["wood"][rate]
    assert after["stocks"]["crop"][rate] < before["stocks"]["crop"][rate]  # the upkeep


async def _village(client: Any, auth: dict[str, str]) -> dict[str, Any]:
    resp = await client.get("/api/snapshot", headers=auth)
    assert resp.status == 200
    village: dict[str, Any] = (await resp.json())["villages"][0]
    return village


async def test_builds_of_several_partitions_complete_in_one_transaction(
    aiohttp_client: Any, pg_settings: Settings, redis: Redis
) -> None:
    """The game's handlers with groups of several partitions in one call
    (``common.queue.gathered``): one transaction takes every order, and each village gets
    its own level. A plug holds the gatherer's one slot until the four groups wait."""
    clock = ManualClock(1_750_000_000_000)
    client = await aiohttp_client(create_app(pg_settings, clock, config=replace(FAST_CONFIG)))
    players = [await _player(client, name) for name in ("ann", "ben", "cat", "dan")]
    partitions = {village % pg_settings.queue_partitions for _, village in players}
    assert len(partitions) == len(players)  # each village in a partition of its own
    before = [await _village(client, auth) for auth, _ in players]
    for auth, village in players:
        resp = await client.post(
            "/api/build",
            json={"village_id": village, "kind": "woodcutter"},
            headers={**auth, "Idempotency-Key": f"build-{village}"},
        )
        assert resp.status == 200, await resp.text()
    await clock.advance(6 * 3_600_000)  # all due
    registry = handler_registry(load_game(pg_settings.game), pg_settings)
    server = TaskServer(pg_settings, registry, clock, config=TaskServerConfig(event_slots=1),
                        burst=True)  # fmt: skip
    plugs: list[asyncio.Task[Ran]] = []

    async def plug(server: TaskServer) -> None:
        assert server.gathered is not None
        gathered = server.gathered

        async def all_wait() -> bool:
            return sum(len(groups) for groups in gathered.waiting.values()) >= len(players)

        async def hold(reg: Registration, group: list[Event]) -> Ran:
            await eventually(all_wait)
            return Ran([], [], None)

        reg = registry.get(BUILD_DONE)
        assert reg is not None
        plugs.append(asyncio.create_task(gathered.run(reg, [], hold)))

    server.on_startup(plug)
    with _counting() as trips:
        await server.run()
    await plugs[0]
    # the four orders taken in ONE transaction by one statement, whose events were taken by
    # one statement too, and the transaction no longer than one order's (the test above's,
    # without its order check: each group's worker checked its own before)
    sent = trips.sent
    taken = [i for i, s in enumerate(sent) if s.startswith("DELETE FROM build_orders ")]
    assert len(taken) == 1, sent
    begin = max(i for i in range(taken[0]) if sent[i].startswith("BEGIN"))
    commit = next(i for i in range(taken[0], len(sent)) if sent[i].startswith("COMMIT"))
    assert sum(s.startswith("WITH taken AS") for s in sent[begin : taken[0]]) == 1, sent
    assert commit - begin + 1 <= MAX_BUILD_DONE - 1, "\n".join(sent[begin : commit + 1])
    after = [await _village(client, auth) for auth, _ in players]
    for old, new in zip(before, after, strict=True):
        assert new["buildings"]["woodcutter"] == old["buildings"]["woodcutter"] + 1
