"""How many PostgreSQL round trips a command costs through the web tier (a regression guard).

A command's speed at 100 connections is bound by its round trips to the database, each
one a wait on a loaded event loop. Counted here per request, on the web tier's own
engine: every statement SQLAlchemy sends (``before_cursor_execute``) plus what asyncpg
sends by itself outside the prepared statements (BEGIN, COMMIT, ROLLBACK and a pool's
pre-ping), read from asyncpg's query logger. The hand-written ceiling
(``bench.web.bare_commands``) makes 6 for a build and 3 for a refused one;
before these were folded, ours made 12, 11 and 13, then 6, 2 and 2, then 2, 1 and 1. A march
made 9 before its reads were one and its event's id was drawn before its row.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import event, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.clock import ManualClock
from common.queue.tx import Tx
from common.settings import Settings, load_settings
from db.engine import create_engine
from db.models import ScheduledEvent, Village
from refgame import state
from refgame.models import BuildOrder, March, Troop
from refgame.resources import STOCKS
from refgame.state import add_troops
from tests.calls import record_calls
from tests.conftest import TEST_REDIS_URL
from tests.waiting import wait_for
from tests.web.conftest import FAST_CONFIG, PASSWORD
from tests.web.helpers import counter
from webfront import commands
from webfront.app import create_app
from webfront.state import ENGINE, QUEUE, SHARED_WRITES

# the most each command kind may cost; lower them when a change saves a round trip
# one read, then the spend, the order, the event and the idempotency rows in one closing
# statement that commits by itself (no BEGIN, no COMMIT)
MAX_BUILD = 2
# the reads run before BEGIN (they lock nothing): a refusal costs no transaction
# one read, with the key's first answer read along (``db.driver.rows_along``)
MAX_REFUSED_BUILD = 1
MAX_REFUSED_TRAIN = 1
# one read (the owner, the target, the rally point, the troops at home); then BEGIN, the
# troops taken, the march row (its id goes in its event), the closing statement, COMMIT
MAX_MARCH = 6
MAX_REFUSED_MARCH = 1  # the read, the key's first answer along


@dataclass
class RoundTrips:
    """Round trips of the web tier's engine, by what they were."""

    sent: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.sent.clear()

    def statement(self, *args: Any) -> None:
        self.sent.append(" ".join(str(args[2]).split())[:60])

    def driver_query(self, record: Any) -> None:
        # asyncpg's own statements (transactions, pings) and those run on the driver
        # (db.driver); SQLAlchemy's go through prepared statements, which this logger does
        # not see, or through executemany, seen above
        self.sent.append(" ".join(record.query.split())[:60])


def _count(engine: AsyncEngine) -> RoundTrips:
    trips = RoundTrips()
    event.listen(engine.sync_engine, "before_cursor_execute", trips.statement)

    def on_connection(dbapi_connection: Any, *_: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(trips.driver_query)

    # connections made later, and those the pool already holds (the logger set dedupes)
    event.listen(engine.sync_engine.pool, "connect", on_connection)
    event.listen(engine.sync_engine.pool, "checkout", on_connection)
    return trips


@pytest.fixture
def pg_settings(postgres_url: str, redis_prefix: str) -> Settings:
    # no fixed metrics port: a task server of these settings (test_event_round_trips) must
    # start beside another world on this machine (``tests/conftest.py::settings``)
    return load_settings(
        database_url=postgres_url, redis_url=TEST_REDIS_URL, redis_prefix=redis_prefix,
        game="refgame", map_radius=8, gameserver_metrics_port=0,
    )  # fmt: skip


@pytest.fixture
async def client(aiohttp_client: Any, pg_settings: Settings, redis: Redis) -> AsyncIterator[Any]:
    app = create_app(pg_settings, ManualClock(1_750_000_000_000), config=replace(FAST_CONFIG))
    yield await aiohttp_client(app)


async def _player(client: Any, name: str) -> tuple[dict[str, str], int]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {"Authorization": f"Bearer {data['token']}"}, int(data["village_id"])


async def _empty_stock(settings: Settings, village_id: int) -> None:
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(STOCKS.table)
                .where(STOCKS.c.village_id == village_id)
                .values(**dict.fromkeys(STOCKS.names, 0), **{f"{r}_rate": 0 for r in STOCKS.names})
            )
    finally:
        await engine.dispose()


async def _post(
    client: Any, trips: RoundTrips, path: str, auth: dict[str, str], key: str, body: dict
) -> tuple[int, list[str]]:
    trips.clear()
    resp = await client.post(path, json=body, headers={**auth, "Idempotency-Key": key})
    await resp.read()
    return resp.status, list(trips.sent)


async def test_a_command_costs_few_round_trips(client: Any, pg_settings: Settings) -> None:
    auth, village = await _player(client, "alice")
    poor, poor_village = await _player(client, "bob")
    await _empty_stock(pg_settings, poor_village)
    trips = _count(client.app[ENGINE])
    build = {"village_id": village, "kind": "woodcutter"}
    # the first use of each statement prepares it: a cost paid once per connection
    status, _ = await _post(client, trips, "/api/build", auth, "warm-1", build)
    assert status == 200

    status, sent = await _post(client, trips, "/api/build", auth, "build-1", build)
    assert status == 200, sent
    assert 0 < len(sent) <= MAX_BUILD, sent
    assert not any(s.startswith(("BEGIN", "COMMIT")) for s in sent), sent
    # its event is in the queue's index before the answer (the web tier's pipelined index)
    queue = client.app[QUEUE]
    engine = create_engine(pg_settings)
    try:
        async with engine.connect() as conn:
            ids = list(await conn.scalars(select(ScheduledEvent.id)))
    finally:
        await engine.dispose()
    assert len(ids) == 2
    assert await queue.missing(queue.partition_of(village), ids) == []

    build = {"village_id": poor_village, "kind": "woodcutter"}
    train = {"village_id": poor_village, "unit": "legionnaire", "count": 1}
    auth = poor
    # the first refusal prepares the refusal's statements
    status, sent = await _post(client, trips, "/api/build", auth, "refused-1", build)
    assert status == 409, sent
    status, sent = await _post(client, trips, "/api/build", auth, "refused-2", build)
    assert status == 409, sent
    assert 0 < len(sent) <= MAX_REFUSED_BUILD, sent
    assert not any(s.startswith(("UPDATE", "INSERT", "DELETE", "BEGIN")) for s in sent), sent

    status, _ = await _post(client, trips, "/api/train", auth, "refused-3", train)
    status, sent = await _post(client, trips, "/api/train", auth, "refused-4", train)
    assert status == 409, sent
    assert 0 < len(sent) <= MAX_REFUSED_TRAIN, sent
    assert not any(s.startswith(("UPDATE", "INSERT", "DELETE", "BEGIN")) for s in sent), sent


async def test_builds_of_many_players_at_once_are_written_in_one_statement(
    client: Any, pg_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing statements handed over within the gather window of the last are written
    together (``db.shared_writes``): each build answered as alone, each order and event
    its own."""
    shared = client.app[SHARED_WRITES]
    shared.runners.gather_ms = 10  # WebConfig.command_gather_ms, off by default
    pacing = shared.runners.clock = ManualClock()  # the window's end is the test's to say
    players = [await _player(client, f"player{i}") for i in range(4)]
    first_auth, first_village = players[0]

    def build(auth: dict[str, str], village: int, key: str) -> Any:
        return client.post("/api/build", json={"village_id": village, "kind": "woodcutter"},
                           headers={**auth, "Idempotency-Key": key})  # fmt: skip

    resp = await build(first_auth, first_village, "alone")  # a quiet process: at once
    assert resp.status == 200, await resp.text()
    written = record_calls(monkeypatch, type(shared), "_write")
    asked = [
        asyncio.ensure_future(build(auth, village, f"k{i}"))
        for i, (auth, village) in enumerate(players)
    ]
    await wait_for(lambda: sum(map(len, shared.waiting.values())) == 4, "four closings waiting")
    await pacing.advance(shared.runners.gather_ms)
    answers = [await a for a in asyncio.as_completed(asked)]
    assert {a.status for a in answers} == {200}
    assert [len(call[3]) for call in written] == [4]  # (self, conn, shape, batch)
    metrics = await (await client.get("/metrics")).text()  # the one alone, then the four
    assert counter(metrics, "webfront_command_closings_total") == 5
    assert counter(metrics, "webfront_command_closing_statements_total") == 2
    engine = create_engine(pg_settings)
    try:
        async with engine.connect() as conn:
            per_village = dict(
                (await conn.execute(
                    select(BuildOrder.village_id, func.count()).group_by(BuildOrder.village_id)
                )).all()
            )  # fmt: skip
            events = await conn.scalar(select(func.count()).select_from(ScheduledEvent))
    finally:
        await engine.dispose()
    assert per_village == {first_village: 2, **{v: 1 for _, v in players[1:]}}
    assert events == 5


async def _add_troops(settings: Settings, village_id: int, troops: dict[str, int]) -> None:
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn, AsyncSession(conn) as session:
            await add_troops(session, village_id, village_id, troops)
            await session.flush()
    finally:
        await engine.dispose()


async def _place(settings: Settings, village_id: int) -> tuple[int, int]:
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            found = (
                await conn.execute(select(Village.x, Village.y).where(Village.id == village_id))
            ).one()
    finally:
        await engine.dispose()
    return int(found[0]), int(found[1])


async def test_a_march_costs_few_round_trips(client: Any, pg_settings: Settings) -> None:
    auth, village = await _player(client, "alice")
    _, target = await _player(client, "bob")
    await _add_troops(pg_settings, village, {"legionnaire": 10})
    x, y = await _place(pg_settings, target)
    trips = _count(client.app[ENGINE])
    march = {"village_id": village, "kind": "raid", "x": x, "y": y, "troops": {"legionnaire": 2}}
    status, _ = await _post(client, trips, "/api/march", auth, "warm-1", march)
    assert status == 200
    status, sent = await _post(client, trips, "/api/march", auth, "march-1", march)
    assert status == 200, sent
    assert 0 < len(sent) <= MAX_MARCH, sent
    too_many = {**march, "troops": {"legionnaire": 7}}  # 6 are left at home
    status, sent = await _post(client, trips, "/api/march", auth, "refused-1", too_many)
    assert status == 409, sent
    assert 0 < len(sent) <= MAX_REFUSED_MARCH, sent
    assert not any(s.startswith(("UPDATE", "INSERT", "DELETE", "BEGIN")) for s in sent), sent


async def test_a_command_after_the_server_dropped_the_pool_applies_once(
    client: Any, pg_settings: Settings
) -> None:
    """No pre-ping: the connections a PostgreSQL restart closed are replaced, and the
    command runs once (the same happens to every pooled connection in a restart)."""
    auth, village = await _player(client, "alice")
    build = {"village_id": village, "kind": "woodcutter"}
    status, _ = await _post(client, _count(client.app[ENGINE]), "/api/build", auth, "k1", build)
    assert status == 200
    engine = create_engine(pg_settings)
    try:
        async with engine.connect() as conn:
            dropped = await conn.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            assert dropped and dropped >= 1
        resp = await client.post(
            "/api/build", json=build, headers={**auth, "Idempotency-Key": "k2"}
        )
        assert resp.status == 200, await resp.text()
        async with engine.connect() as conn:
            orders = await conn.scalar(
                select(func.count()).select_from(BuildOrder).where(BuildOrder.village_id == village)
            )
        assert orders == 2
    finally:
        await engine.dispose()


NOW_MS = 1_750_000_000_000


async def _pending(
    settings: Settings, event_id: int, village_id: int, due_ms: int, **row: Any
) -> None:
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(ScheduledEvent).values(
                    id=event_id, kind="build_done", village_id=village_id, due_ms=due_ms,
                    priority=0, payload=b"\x80", created_ms=due_ms - 1, **row,
                )
            )  # fmt: skip
    finally:
        await engine.dispose()


@pytest.fixture
async def any_db_client(aiohttp_client: Any, settings: Settings, redis: Redis) -> Any:
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": 8})
    app = create_app(game_settings, ManualClock(NOW_MS), config=replace(FAST_CONFIG))
    return await aiohttp_client(app)


async def test_the_one_read_holds_what_the_separate_reads_held(
    any_db_client: Any, settings: Settings
) -> None:
    """The overdue check and the settle horizon, folded into the command's read, still
    refuse a village with an overdue event and settle no later than the earliest one."""
    client = any_db_client
    auth, village = await _player(client, "alice")
    _, other = await _player(client, "bob")

    async def build(key: str) -> tuple[int, dict[str, Any]]:
        resp = await client.post(
            "/api/build",
            json={"village_id": village, "kind": "woodcutter"},
            headers={**auth, "Idempotency-Key": key},
        )
        return resp.status, await resp.json()

    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:  # last settled before the event below was due
            await conn.execute(
                update(STOCKS.table)
                .where(STOCKS.c.village_id == village)
                .values(updated_ms=NOW_MS - 10_000)
            )
    finally:
        await engine.dispose()
    # a healthy event overdue elsewhere: the stock is settled at its due time
    await _pending(settings, 1, other, NOW_MS - 5_000)
    status, order = await build("k1")
    assert status == 200, order
    assert order["spent_ms"] == NOW_MS - 5_000
    # one overdue here that failed once still holds this village (not the world)
    await _pending(settings, 2, village, NOW_MS - 1_000, attempts=1)
    status, error = await build("k2")
    assert status == 409 and error["error"]["code"] == "events_pending", error
    # a dead one holds nothing
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(ScheduledEvent).where(ScheduledEvent.id == 2).values(dead_ms=NOW_MS)
            )
    finally:
        await engine.dispose()
    status, order = await build("k3")
    assert status == 200, order
    assert order["spent_ms"] == NOW_MS - 5_000


async def test_a_build_whose_stock_moved_after_its_read_runs_again(
    any_db_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spend waits for the closing statement and holds only on the stock as read: when
    another writer settled it later in between, nothing is written and the command runs
    again, spending at the stock's new time; one whose stock moves at every try is
    answered 409 ``conflict`` and writes nothing."""
    client = any_db_client
    auth, village = await _player(client, "alice")
    engine = create_engine(settings)
    moves = {"left": 1}
    write_kept = Tx.write_kept

    async def moved_first(tx: Tx, *args: Any, **kw: Any) -> None:
        if moves["left"]:  # another writer settles the stock 1 ms later than the read
            moves["left"] -= 1
            async with engine.begin() as conn:
                await conn.execute(
                    update(STOCKS.table)
                    .where(STOCKS.c.village_id == village)
                    .values(updated_ms=STOCKS.c.updated_ms + 1)
                )
        await write_kept(tx, *args, **kw)

    async def orders() -> int:
        async with engine.connect() as conn:
            return int(await conn.scalar(select(func.count()).select_from(BuildOrder)) or 0)

    async def stock_time() -> int:
        async with engine.connect() as conn:
            found = await conn.scalar(
                select(STOCKS.c.updated_ms).where(STOCKS.c.village_id == village)
            )
            return int(found or 0)

    monkeypatch.setattr(Tx, "write_kept", moved_first)
    calls = record_calls(monkeypatch, Tx, "write_kept")
    build = {"village_id": village, "kind": "woodcutter"}
    try:
        resp = await client.post("/api/build", json=build, headers={**auth, "Idempotency-Key": "a"})
        order = await resp.json()
        assert resp.status == 200, order
        assert len(calls) == 2 and await orders() == 1
        assert order["spent_ms"] == NOW_MS + 1 == await stock_time()
        moves["left"] = 10**6  # it moves at every try
        resp = await client.post("/api/build", json=build, headers={**auth, "Idempotency-Key": "b"})
        error = await resp.json()
        assert resp.status == 409 and error["error"]["code"] == "conflict", error
        assert len(calls) == 2 + 5 and await orders() == 1
    finally:
        await engine.dispose()


async def test_a_march_whose_troops_left_after_its_read_is_judged_again(
    any_db_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The troops are judged on the march's one read and taken later in its transaction:
    when they fell in between (a battle's losses), nothing is written and the march runs
    again from its read, which refuses it now with what is really at home."""
    client = any_db_client
    auth, village = await _player(client, "alice")
    _, target = await _player(client, "bob")
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": 8})
    await _add_troops(game_settings, village, {"legionnaire": 10})
    x, y = await _place(game_settings, target)
    engine = create_engine(settings)
    take = state.take_troops
    taken: list[dict[str, int]] = []

    async def lost_first(session: Any, *args: Any) -> bool:
        if not taken:  # another transaction takes 5 of the 10 between the read and here
            async with engine.begin() as conn, AsyncSession(conn) as other:
                assert await take(other, village, village, {"legionnaire": 5})
                await other.flush()
        taken.append(dict(args[-1]))
        return await take(session, *args)

    monkeypatch.setattr(state, "take_troops", lost_first)
    reads = record_calls(monkeypatch, Tx, "read")
    march = {"village_id": village, "kind": "raid", "x": x, "y": y, "troops": {"legionnaire": 6}}
    try:
        resp = await client.post("/api/march", json=march, headers={**auth, "Idempotency-Key": "a"})
        error = await resp.json()
        assert resp.status == 409 and error["error"]["code"] == "insufficient_troops", error
        assert error["error"]["details"]["available"] == {"legionnaire": 5}, error
        # two runs, each from its read; the second refused it there (where the key's answer
        # cannot be read along, SQLite, the framework reads it after the refusal)
        game_reads = [r for r in reads if r[1] is not commands._STORED]
        assert len(game_reads) == 2 and taken == [{"legionnaire": 6}]
        async with engine.connect() as conn:
            assert await conn.scalar(select(func.count()).select_from(March)) == 0
            home = await conn.scalar(select(Troop.count).where(Troop.village_id == village))
        assert home == 5
    finally:
        await engine.dispose()
