"""Many fleets at once through the real task server: every planet of a generated world
attacks its neighbour at the same moment, so the handlers run real batches (several
battles at one planet, arrivals and returns mixed). Ships are conserved (what is left
is what there was less every battle's losses), every report replays to its stored
outcome and no stock goes negative."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue, NewEvent
from common.queue.durable import add_durable_events
from common.settings import Settings
from db.engine import create_engine
from db.worldgen import generate_world
from examples.spacegame import admin, state
from examples.spacegame.commands import FLEET_ARRIVE
from examples.spacegame.models import Fleet, Report, Ships
from examples.spacegame.world import GAME
from gameapi import places
from gameserver.main import game_registry
from gameserver.taskserver import TaskServer
from tests.queue.conftest import eventually

pytestmark = pytest.mark.slow

PLANETS = 40
FIGHTERS, SENT = 20, 10  # each planet keeps half its fighters home to defend


async def test_a_wave_of_attacks(space_settings: Settings, redis: Redis) -> None:
    engine = create_engine(space_settings)
    queue = EventQueue(
        redis, prefix=space_settings.redis_prefix, partitions=space_settings.queue_partitions,
        clock=SYSTEM_CLOCK,
    )  # fmt: skip
    running = None
    server = None
    try:
        await generate_world(
            engine, players=PLANETS, template=GAME.new_place(space_settings.world_speed, True),
            shards=space_settings.tick_shards, map_radius=space_settings.map_radius, seed=3,
            stocks=state.stocks(),
        )  # fmt: skip
        now = SYSTEM_CLOCK.now_ms()
        async with AsyncSession(engine) as session, session.begin():
            ids = list((await session.execute(select(places.c.id).order_by(places.c.id))).scalars())
            owners = dict((await session.execute(select(places.c.id, places.c.player_id))).all())
            await session.execute(
                update(Ships).where(Ships.name == "light_fighter").values(count=FIGHTERS - SENT)
            )
            before = await _ships(session)
            events = []
            for n, origin in enumerate(ids):
                target, event_id = ids[(n + 1) % len(ids)], queue.ids.next_id()
                await session.execute(
                    insert(Fleet).values(
                        owner_id=owners[origin],
                        origin_id=origin,
                        target_id=target,
                        mission="attack",
                        state="out",
                        ships={"light_fighter": SENT},
                        metal=0,
                        crystal=0,
                        deuterium=0,
                        speed_pct=100,
                        depart_ms=now - 1_000,
                        arrive_ms=now,
                        event_id=event_id,
                        seed=1_000 + n,
                    )
                )
                events.append(NewEvent(FLEET_ARRIVE, target, now, {}, id=event_id))
            before["light_fighter"] += SENT * len(ids)
            written = await add_durable_events(session, events, ids=queue.ids)
        await queue.index(written)
        server = TaskServer(space_settings, game_registry(space_settings))
        running = asyncio.create_task(server.run(), name="task server")

        async def all_home() -> bool:
            async with engine.connect() as conn:
                fleets = (await conn.execute(select(func.count()).select_from(Fleet))).scalar()
                reports = (await conn.execute(select(func.count()).select_from(Report))).scalar()
            return fleets == 0 and reports == 2 * PLANETS

        await eventually(all_home, 120, alive=[running])
        async with AsyncSession(engine) as session:
            after = await _ships(session)
            lost: Counter[str] = Counter()
            battles = {}
            for report_id, body in (await session.execute(select(Report.id, Report.body))).all():
                replayed = await admin.replay_report(session, report_id)
                assert replayed is not None and replayed["equal"] is True
                battles[(body["origin_id"], body["target_id"])] = body
            assert len(battles) == PLANETS
            for body in battles.values():
                lost.update(body["attacker_losses"])
                lost.update(body["defender_losses"])
            assert after == before - lost
            st = state.stocks()
            negative = await session.execute(
                select(func.count()).where(*(st.c[r] < 0 for r in st.names))
            )
            assert negative.scalar() == 0
    finally:
        if server is not None and running is not None:
            server.stop()  # not a cancel: see test_end_to_end's world
            await running
        await engine.dispose()


async def _ships(session: AsyncSession) -> Counter[str]:
    rows = await session.execute(select(Ships.name, func.sum(Ships.count)).group_by(Ships.name))
    return Counter({name: int(total) for name, total in rows.all()})
