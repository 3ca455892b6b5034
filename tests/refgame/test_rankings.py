"""Battle points and rankings against a real database: the march handler adds points in the
battle's transaction, the ranking job ranks every player, GET /api/rankings pages them."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import ManualClock
from common.queue.handlers import HandlerRegistry
from common.settings import Settings
from db.engine import session_factory
from db.models import Player, Village
from db.worldgen import generate_world
from gameapi import load_game
from gameapi.testing import GameDriver
from gameserver import builtin
from gameserver.taskserver import TaskServer
from refgame import commands, handlers, rankings
from refgame.battle import BattleResult, replay_report
from refgame.models import Alliance, AllianceMember, Building, PlayerPoints, Ranking, Report
from refgame.points import BattlePoints, award, battle_points
from refgame.resources import STOCKS
from refgame.world import village_template
from tests.queue.conftest import eventually
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app

T0 = 1_750_000_000_000
DAY = 86_400_000


@pytest.fixture
async def game(engine: AsyncEngine) -> GameDriver:
    clock = ManualClock(T0)
    await generate_world(
        engine, stocks=STOCKS, players=3, template=village_template(1.0), shards=4,
        map_radius=6, seed=3, clock=clock,
    )  # fmt: skip
    return GameDriver(load_game("refgame"), engine, clock)


async def _xy(game: GameDriver, village_id: int) -> tuple[int, int]:
    async with game.sessions() as session:
        row = await session.execute(select(Village.x, Village.y).where(Village.id == village_id))
        x, y = row.one()
        return x, y


async def _owner(game: GameDriver, village_id: int) -> int:
    async with game.sessions() as session:
        owner = await session.scalar(select(Village.player_id).where(Village.id == village_id))
        assert owner is not None
        return owner


async def _points(game: GameDriver) -> dict[int, tuple[int, int]]:
    async with game.sessions() as session:
        rows = await session.execute(
            select(PlayerPoints.player_id, PlayerPoints.attack_points, PlayerPoints.defence_points)
        )
        return {p: (a, d) for p, a, d in rows}


async def _ranking(game: GameDriver, kind: str) -> list[tuple[int, int, int]]:
    """``(rank, player_id, value)`` in rank order."""
    async with game.sessions() as session:
        rows = await session.execute(
            select(Ranking.rank, Ranking.player_id, Ranking.value)
            .where(Ranking.kind == kind)
            .order_by(Ranking.rank, Ranking.player_id)
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


def test_points_are_the_upkeep_of_the_troops_killed() -> None:
    result = BattleResult(
        kind="attack", seed=1, wall_level=0,
        attackers={"legionnaire": 10, "equites_imperatoris": 4},
        defenders={"praetorian": 8, "equites_caesaris": 2},
        luck_permille=0, attack_power=0, defense_power=0, attacker_won=True,
        attacker_loss_ppt=0, defender_loss_ppt=0,
        attacker_losses={"legionnaire": 3, "equites_imperatoris": 2},
        defender_losses={"praetorian": 8, "equites_caesaris": 2},
    )  # fmt: skip
    # upkeep: legionnaire 1, praetorian 1, equites imperatoris 3, equites caesaris 4
    assert battle_points(result) == BattlePoints(attack=8 + 2 * 4, defence=3 + 2 * 3)
    assert award(BattlePoints(16, 9), 1, 2) == [(1, 16, 0), (2, 0, 9)]
    assert award(BattlePoints(16, 9), 1, None) == [(1, 16, 0)]  # an abandoned village
    assert award(BattlePoints(16, 0), 1, 2) == [(1, 16, 0)]
    assert award(BattlePoints(16, 9), 1, 1) == []  # one player's own villages


async def test_battles_add_points_and_the_job_ranks_every_player(game: GameDriver) -> None:
    sent = {"legionnaire": 15, "imperian": 5, "equites_imperatoris": 3}
    points: dict[int, list[int]] = {}
    for origin, target in ((1, 2), (3, 2)):
        march = await game.command(
            commands.send_march, await _owner(game, origin), origin, "attack",
            *(await _xy(game, target)), sent,
        )  # fmt: skip
        await game.run_until(march["arrive_ms"])
    async with game.sessions() as session:
        bodies = (
            await session.execute(
                select(Report.body).where(Report.kind == "battle").order_by(Report.id)
            )
        ).scalars()
        seen = set()
        for body in bodies:  # both sides got the report: count each battle once
            if body["attacker"]["village_id"] in seen:
                continue
            seen.add(body["attacker"]["village_id"])
            earned = battle_points(replay_report(body))
            for player, a, d in award(
                earned, body["attacker"]["player_id"], body["defender"]["player_id"]
            ):
                total = points.setdefault(player, [0, 0])
                total[0] += a
                total[1] += d
    assert len(seen) == 2
    assert any(a for a, _ in points.values()) and any(d for _, d in points.values())
    assert await _points(game) == {p: (a, d) for p, (a, d) in points.items()}

    await rankings.compute_rankings(game.sessions, game.clock.now_ms())
    async with game.sessions() as session:
        everyone = set((await session.execute(select(Player.id))).scalars())
        population = dict(
            (
                await session.execute(
                    select(Village.player_id, func.sum(Building.level))
                    .join(Building, Building.village_id == Village.id)
                    .group_by(Village.player_id)
                )
            ).all()
        )
    for kind, value_of in (
        ("population", lambda p: population.get(p, 0)),
        ("attack", lambda p: points.get(p, [0, 0])[0]),
        ("defence", lambda p: points.get(p, [0, 0])[1]),
    ):
        rows = await _ranking(game, kind)
        assert {p for _, p, _ in rows} == everyone
        for rank, player, value in rows:
            assert value == value_of(player)
            assert rank == 1 + sum(1 for _, _, v in rows if v > value)  # ties share a rank

    # the next run replaces the last one (no rows left over, a new time)
    await game.clock.advance(DAY)
    await rankings.compute_rankings(game.sessions, game.clock.now_ms())
    async with game.sessions() as session:
        times = (await session.execute(select(func.distinct(Ranking.computed_ms)))).scalars()
        assert list(times) == [game.clock.now_ms()]
        count = await session.scalar(select(func.count()).select_from(Ranking))
    assert count == len(everyone) * len(rankings.KINDS)


async def test_the_task_server_runs_the_ranking_job(
    redis: Redis, settings: Settings, engine: AsyncEngine
) -> None:
    game_settings = settings.model_copy(update={"game": "refgame", "queue_partitions": 2})
    await generate_world(
        engine, stocks=STOCKS, players=2, template=village_template(1.0), shards=4,
        map_radius=6, seed=3,
    )  # fmt: skip
    registry = HandlerRegistry()
    builtin.register(registry)
    handlers.register(registry, game_settings)
    server = TaskServer(game_settings, registry)
    running = asyncio.create_task(server.run(), name="task server")
    sessions = session_factory(engine)

    async def ranked() -> bool:
        async with sessions() as session:
            return bool(await session.scalar(select(func.count()).select_from(Ranking)))

    try:
        await eventually(ranked, alive=[running])
    finally:
        server.stop()
        await asyncio.wait_for(running, 15)
    assert await _ranking_kinds(engine) == set(rankings.KINDS)


async def _ranking_kinds(engine: AsyncEngine) -> set[str]:
    async with session_factory(engine)() as session:
        return set((await session.execute(select(func.distinct(Ranking.kind)))).scalars())


# ---- alliances: the aggregation over the membership tables the social branch adds ---------


async def test_alliance_rankings_sum_their_members(game: GameDriver) -> None:
    await rankings.compute_rankings(game.sessions, game.clock.now_ms())
    pop = {p: v for _, p, v in await _ranking(game, "population")}
    players = sorted(pop)
    now = game.clock.now_ms()
    async with game.sessions() as session, session.begin():
        await session.execute(
            insert(Alliance),
            [{"id": 1, "name": "North", "name_key": "north", "tag": "N", "tag_key": "n",
              "created_ms": now, "changed_ms": now},
             {"id": 2, "name": "South", "name_key": "south", "tag": "S", "tag_key": "s",
              "created_ms": now, "changed_ms": now}],
        )  # fmt: skip
        await session.execute(
            insert(AllianceMember),
            [{"alliance_id": 1, "player_id": players[0], "role": "founder", "joined_ms": now},
             {"alliance_id": 1, "player_id": players[1], "role": "member", "joined_ms": now},
             {"alliance_id": 2, "player_id": players[2], "role": "founder", "joined_ms": now}],
        )  # fmt: skip
    async with game.sessions() as session:
        page = await rankings.alliance_ranking(session, players[2], "population", 1, 10)
    north, south = pop[players[0]] + pop[players[1]], pop[players[2]]
    assert [(r["alliance_id"], r["value"], r["members"]) for r in page["rows"]] == [
        (1, north, 2),
        (2, south, 1),
    ]
    assert [r["rank"] for r in page["rows"]] == [1, 2] and page["total"] == 2
    assert page["me"] == {"rank": 2, "alliance_id": 2, "value": south}
    rankings.RankingsOut.model_validate({"kind": "population", "of": "alliance", "page": 1,
                                         "limit": 10, **page})  # fmt: skip


# ---- the route ----------------------------------------------------------------------------


@pytest.fixture
async def client(aiohttp_client: Any, settings: Settings, redis: Redis) -> Any:
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": 8})
    app = create_app(game_settings, ManualClock(T0), config=replace(FAST_CONFIG))
    return await aiohttp_client(app)


async def _register(client: Any, name: str) -> dict[str, str]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {"Authorization": f"Bearer {data['token']}"}


async def test_the_route_pages_a_ranking_with_the_players_own_rank(
    client: Any, engine: AsyncEngine
) -> None:
    auth = {name: await _register(client, name) for name in ("alice", "bob", "carol")}
    resp = await client.get("/api/rankings", headers=auth["bob"])
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["rows"] == []  # before the job's first run
    sessions = session_factory(engine)
    async with sessions() as session, session.begin():
        ids = dict((await session.execute(select(Player.name, Player.id))).all())
        await session.execute(
            insert(PlayerPoints),
            [{"player_id": ids["alice"], "attack_points": 5, "defence_points": 0},
             {"player_id": ids["carol"], "attack_points": 9, "defence_points": 2}],
        )  # fmt: skip
    await rankings.compute_rankings(sessions, T0)

    resp = await client.get(
        "/api/rankings", params={"kind": "attack", "limit": "2"}, headers=auth["bob"]
    )
    assert resp.status == 200, await resp.text()
    page = await resp.json()
    rankings.RankingsOut.model_validate(page)  # the documented shape
    assert [(r["rank"], r["name"], r["value"]) for r in page["rows"]] == [
        (1, "carol", 9),
        (2, "alice", 5),
    ]
    assert (
        page["total"] == 3 and page["computed_ms"] == T0 and page["me"] == {"rank": 3, "value": 0}
    )
    resp = await client.get(
        "/api/rankings", params={"kind": "attack", "limit": "2", "page": "2"}, headers=auth["bob"]
    )
    assert [r["name"] for r in (await resp.json())["rows"]] == ["bob"]


async def test_the_route_ranks_alliances_founded_through_the_commands(
    client: Any, engine: AsyncEngine
) -> None:
    auth = {name: await _register(client, name) for name in ("alice", "bob", "carol")}
    for who, name, tag in (("alice", "North Wind", "NW"), ("carol", "South Sea", "SS")):
        resp = await client.post(
            "/api/alliance/create", json={"name": name, "tag": tag}, headers=auth[who]
        )
        assert resp.status == 200, await resp.text()
    await rankings.compute_rankings(session_factory(engine), T0)
    resp = await client.get(
        "/api/rankings", params={"of": "alliance", "kind": "population"}, headers=auth["carol"]
    )
    assert resp.status == 200, await resp.text()
    page = await resp.json()
    rankings.RankingsOut.model_validate(page)
    # two one-member alliances of fresh villages: equal values share rank 1
    assert sorted((r["rank"], r["tag"], r["members"]) for r in page["rows"]) == [
        (1, "NW", 1),
        (1, "SS", 1),
    ]
    assert page["me"]["rank"] == 1 and page["total"] == 2
    resp = await client.get("/api/rankings", params={"of": "alliance"}, headers=auth["bob"])
    assert (await resp.json())["me"] is None  # bob is in no alliance


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"kind": "wealth"}, 422, None),
        ({"page": "0"}, 422, None),
        ({"page": "x"}, 422, None),
        ({"limit": "0"}, 422, None),
        ({"limit": str(rankings.MAX_LIMIT + 1)}, 422, None),
        ({"of": "guild"}, 422, None),
        ({"sort": "value"}, 422, None),
    ],
)
async def test_bad_ranking_queries_are_refused(
    client: Any, params: dict[str, str], status: int, code: str | None
) -> None:
    auth = await _register(client, "alice")
    resp = await client.get("/api/rankings", params=params, headers=auth)
    assert resp.status == status, await resp.text()
    error = (await resp.json())["error"]
    assert error["message"]
    if code:
        assert error["code"] == code
    assert (await client.get("/api/rankings", params=params)).status == 401  # no session
