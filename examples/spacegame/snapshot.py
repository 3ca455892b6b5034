"""What a player sees: snapshot parts of each planet and the reports query.

Each planet has its temperature (a value), buildings and ships (maps), orders
and fleets (lists); research (a map) belongs to the player, beside the planets.
A fleet flying at one of the player's planets shows up under ``incoming`` with
its mission and arrival only (OGame shows no more).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession

import gameapi
from examples.spacegame.models import Building, Fleet, Order, Planet, Report, Research, Ships


def _select(*columns: Any) -> Select[Any]:
    """``select`` typed as SnapshotPart's query expects, whatever the columns' types."""
    return select(*columns)


def _temperature() -> Select[Any]:
    return _select(Planet.place_id.label("place_id"), Planet.temperature)


def _buildings() -> Select[Any]:
    return _select(Building.place_id.label("place_id"), Building.name, Building.level)


def _ships() -> Select[Any]:
    return _select(Ships.place_id.label("place_id"), Ships.name, Ships.count)


def _research() -> Select[Any]:
    # research belongs to the player: a part of the player's, beside the planets
    return _select(Research.player_id.label("player_id"), Research.name, Research.level)


def _orders() -> Select[Any]:
    return _select(
        Order.place_id.label("place_id"),
        Order.queue,
        Order.item,
        Order.amount,
        Order.started_ms,
        Order.done_ms,
    )


def _fleets() -> Select[Any]:
    return _select(
        Fleet.origin_id.label("place_id"),
        Fleet.id,
        Fleet.target_id,
        Fleet.mission,
        Fleet.state,
        Fleet.ships,
        Fleet.metal,
        Fleet.crystal,
        Fleet.deuterium,
        Fleet.depart_ms,
        Fleet.arrive_ms,
    )


def _incoming() -> Select[Any]:
    return _select(
        Fleet.target_id.label("place_id"),
        Fleet.id,
        Fleet.owner_id,
        Fleet.origin_id,
        Fleet.mission,
        Fleet.arrive_ms,
    ).where(Fleet.state == "out")


def _incoming_view(row: dict[str, Any], viewer_id: int) -> dict[str, Any] | None:
    if row["owner_id"] == viewer_id:
        return None  # one's own fleets are listed under "fleets"
    return {k: row[k] for k in ("id", "origin_id", "mission", "arrive_ms")}


PARTS: tuple[gameapi.SnapshotPart, ...] = (
    gameapi.SnapshotPart("temperature", _temperature, shape="value"),
    gameapi.SnapshotPart("buildings", _buildings, shape="map"),
    gameapi.SnapshotPart("ships", _ships, shape="map"),
    gameapi.SnapshotPart("research", _research, shape="map"),
    gameapi.SnapshotPart("orders", _orders),
    gameapi.SnapshotPart("fleets", _fleets),
    gameapi.SnapshotPart("incoming", _incoming, view=_incoming_view),
)


class ReportsQuery(gameapi.Query):
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    before_id: gameapi.Id | None = None


async def reports(session: AsyncSession, player_id: int, query: ReportsQuery) -> dict[str, Any]:
    """The player's newest reports, newest first; page with ``before_id``."""
    stmt = select(Report.id, Report.kind, Report.created_ms, Report.body).where(
        Report.player_id == player_id
    )
    if query.before_id is not None:
        stmt = stmt.where(Report.id < query.before_id)
    rows = await session.execute(stmt.order_by(Report.id.desc()).limit(query.limit))
    return {"reports": [dict(r._mapping) for r in rows]}


QUERIES: tuple[gameapi.QueryRoute[Any], ...] = (
    gameapi.QueryRoute("sg/reports", ReportsQuery, reports, summary="Battle and transport reports"),
)
