"""Rows the web tests need that no API creates yet (reports, marches, stock changes), and a
wait for a change made in Redis behind the web process's back to reach it."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.amounts import SCALE
from refgame.models import March, Report
from refgame.resources import STOCKS
from tests.waiting import wait_for
from webfront.state import LOCAL_CACHE

_next_id = [10_000]


async def version_pushed(client: TestClient, player_id: int) -> None:
    """Wait until the app has read Redis's push for ``player_id``'s version, changed by
    another connection (``webfront.localcache``: Redis sends the push beside the writer's
    reply, so a request read in the same loop iteration may still be answered from memory).
    On a cluster, where no version is remembered, at once."""
    versions = client.app[LOCAL_CACHE].versions
    await wait_for(lambda: player_id not in versions, "Redis's push read")


async def session_pushed(client: TestClient, digest: str) -> None:
    """``version_pushed`` for the session of token hash ``digest``."""
    sessions = client.app[LOCAL_CACHE].sessions
    await wait_for(lambda: digest not in sessions, "Redis's push read")


def next_id() -> int:
    _next_id[0] += 1
    return _next_id[0]


async def add_reports(
    engine: AsyncEngine, player_id: int, count: int, start_ms: int = 1_700_000_000_000
) -> list[int]:
    ids = [next_id() for _ in range(count)]
    async with engine.begin() as conn:
        await conn.execute(
            insert(Report),
            [
                {
                    "id": rid,
                    "player_id": player_id,
                    "kind": "battle",
                    "title": f"report {i}",
                    "body": {"n": i},
                    "created_ms": start_ms + i,
                    "is_read": False,
                }
                for i, rid in enumerate(ids)
            ],
        )
    return ids


async def add_march(
    engine: AsyncEngine, kind: str, origin: int, target: int, troops: dict[str, int], now: int
) -> int:
    march_id = next_id()
    async with engine.begin() as conn:
        await conn.execute(
            insert(March).values(
                id=march_id,
                kind=kind,
                origin_village_id=origin,
                target_village_id=target,
                troops=troops,
                loot={},
                depart_ms=now,
                arrive_ms=now + 60_000,
                event_id=next_id(),
            )
        )
    return march_id


async def wood_fixed(engine: AsyncEngine, village_id: int) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(select(STOCKS.c.wood).where(STOCKS.c.village_id == village_id))
        return int(found.scalar_one())


async def set_wood(engine: AsyncEngine, village_id: int, units: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(STOCKS.table)
            .where(STOCKS.c.village_id == village_id)
            .values(wood=units * SCALE, warehouse_cap=max(units, 800) * SCALE)
        )


def json_body(**fields: Any) -> dict[str, Any]:
    return fields


async def drop_other_connections(engine: AsyncEngine) -> None:
    """Terminate every other connection to the test's database: a restart, as the
    connections pooled or kept by the app see it."""
    async with engine.connect() as conn:
        await conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )


def counter(metrics_text: str, name: str) -> float:
    """A counter's value in a /metrics answer."""
    for line in metrics_text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")
