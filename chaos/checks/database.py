"""Reading the database: the baseline before the load, the final state after it."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from db.models import IdempotentResponse, ProcessedEvent, ScheduledEvent, Village
from refgame.models import (
    Alliance,
    AllianceMember,
    Building,
    BuildOrder,
    March,
    Message,
    Trade,
    TrainingOrder,
    Troop,
)
from refgame.models import Report as ReportRow
from refgame.resources import STOCKS


@dataclass
class Baseline:
    """The world before the load: per village its stock row, buildings and troops."""

    taken_ms: int
    stock: dict[int, dict[str, int]]
    buildings: dict[int, dict[str, int]]
    troops: dict[int, Counter[str]]  # home village -> unit -> count (wherever they stand)
    villages: dict[int, tuple[int, int, int | None]]  # id -> (x, y, player_id)


async def _read_stock_and_buildings(
    conn: AsyncConnection,
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """Every village's stock row, and its building levels by kind."""
    stock = {int(r.village_id): dict(r._mapping) for r in await conn.execute(select(STOCKS.table))}
    buildings: dict[int, dict[str, int]] = defaultdict(dict)
    for vid, kind, level in await conn.execute(
        select(Building.village_id, Building.kind, Building.level)
    ):
        buildings[int(vid)][kind] = int(level)
    return stock, dict(buildings)


async def read_baseline(engine: AsyncEngine, taken_ms: int) -> Baseline:
    async with engine.connect() as conn:
        stock, buildings = await _read_stock_and_buildings(conn)
        troops: dict[int, Counter[str]] = defaultdict(Counter)
        for home, unit, count in await conn.execute(
            select(Troop.home_village_id, Troop.unit, Troop.count)
        ):
            troops[int(home)][unit] += int(count)
        villages = {
            int(v.id): (int(v.x), int(v.y), v.player_id)
            for v in await conn.execute(select(Village.id, Village.x, Village.y, Village.player_id))
        }
    return Baseline(taken_ms, stock, buildings, dict(troops), villages)


@dataclass
class Final:
    """The world at the end, after everything due has run."""

    now_ms: int
    stock: dict[int, dict[str, int]]
    buildings: dict[int, dict[str, int]]
    troops: list[tuple[int, int, str, int]]  # (village, home, unit, count)
    marches: list[dict[str, Any]]
    build_orders: list[tuple[int, int, int]]  # (id, village, done_ms)
    training_orders: list[tuple[int, int, int]]
    scheduled: list[tuple[int, str, int, int]]  # (id, kind, village, due_ms)
    processed: list[tuple[int, str, int, int]]  # (id, kind, village, processed_ms)
    reports: list[tuple[int, int, str, dict[str, Any], int]]  # (id, player, kind, body, created)
    idempotent: dict[tuple[int, str], tuple[int, dict[str, Any], int]]  # -> (status, body, ms)
    alliances: dict[int, str] = field(default_factory=dict)  # id -> tag
    members: list[tuple[int, int, str]] = field(default_factory=list)  # (player, alliance, role)
    messages: int = 0
    trades: list[dict[str, Any]] = field(default_factory=list)  # merchants still on the way


async def read_final(engine: AsyncEngine, now_ms: int) -> Final:
    async with engine.connect() as conn:
        stock, buildings = await _read_stock_and_buildings(conn)
        troops = [
            (int(a), int(b), str(c), int(d))
            for a, b, c, d in await conn.execute(
                select(Troop.village_id, Troop.home_village_id, Troop.unit, Troop.count)
            )
        ]
        marches = [dict(r._mapping) for r in await conn.execute(select(March.__table__))]
        trades = [dict(r._mapping) for r in await conn.execute(select(Trade.__table__))]
        build_orders = [
            (int(a), int(b), int(c))
            for a, b, c in await conn.execute(
                select(BuildOrder.id, BuildOrder.village_id, BuildOrder.done_ms)
            )
        ]
        training_orders = [
            (int(a), int(b), int(c))
            for a, b, c in await conn.execute(
                select(TrainingOrder.id, TrainingOrder.village_id, TrainingOrder.done_ms)
            )
        ]
        scheduled = [
            (int(a), str(b), int(c), int(d))
            for a, b, c, d in await conn.execute(
                select(
                    ScheduledEvent.id,
                    ScheduledEvent.kind,
                    ScheduledEvent.village_id,
                    ScheduledEvent.due_ms,
                )
            )
        ]
        processed = [
            (int(a), str(b), int(c), int(d))
            for a, b, c, d in await conn.execute(
                select(
                    ProcessedEvent.event_id,
                    ProcessedEvent.kind,
                    ProcessedEvent.village_id,
                    ProcessedEvent.processed_ms,
                )
            )
        ]
        reports = [
            (int(a), int(b), str(c), d, int(e))
            for a, b, c, d, e in await conn.execute(
                select(
                    ReportRow.id,
                    ReportRow.player_id,
                    ReportRow.kind,
                    ReportRow.body,
                    ReportRow.created_ms,
                )
            )
        ]
        idempotent = {
            (int(p), str(k)): (int(s), b, int(c))
            for p, k, s, b, c in await conn.execute(
                select(
                    IdempotentResponse.player_id,
                    IdempotentResponse.key,
                    IdempotentResponse.status,
                    IdempotentResponse.body,
                    IdempotentResponse.created_ms,
                )
            )
        }
        alliances = {
            int(a): str(t) for a, t in await conn.execute(select(Alliance.id, Alliance.tag))
        }
        members = [
            (int(p), int(a), str(r))
            for p, a, r in await conn.execute(
                select(AllianceMember.player_id, AllianceMember.alliance_id, AllianceMember.role)
            )
        ]
        messages = int((await conn.execute(select(func.count()).select_from(Message))).scalar_one())
    return Final(
        now_ms, stock, buildings, troops, marches, build_orders, training_orders,
        scheduled, processed, reports, idempotent, alliances, members, messages, trades,
    )  # fmt: skip
