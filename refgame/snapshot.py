"""The reference game's parts of a player's snapshot (``GET /api/snapshot``).

Each village of the player gets its buildings and queues, its troops (at home,
reinforcements standing in it, its own troops standing elsewhere), the marches
leaving and reaching it, its settlers on their way to found a village, its merchants
(free and total) and the trades leaving and reaching it; the player gets the counts
of unread reports, unread messages and pending alliance invitations, and their
alliance (``alliance``: id, name, tag, their role and the member ids, or null). The
framework reads every part of a batch of players with one statement
(``gameapi.SnapshotPart``); a list's rows come in the order of their columns.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from sqlalchemy import Integer, cast, false, func, select, true
from sqlalchemy.orm import aliased

from gameapi import Out, SnapshotPart, json_list, places, players
from gameapi.game import AnySelect
from refgame.models import (
    Alliance,
    AllianceInvitation,
    AllianceMember,
    Building,
    BuildOrder,
    March,
    Message,
    Report,
    SettleMarch,
    Trade,
    TrainingOrder,
    Troop,
)
from refgame.trade import MERCHANTS_PER_LEVEL

# ---- response models (documentation, and checked against real answers by the tests)


class BuildOrderOut(Out):
    id: int
    kind: str
    target_level: int
    started_ms: int
    done_ms: int


class TrainingOrderOut(Out):
    id: int
    unit: str
    count: int
    started_ms: int
    done_ms: int


class TroopsAtOut(Out):
    village_id: int = Field(description="the other village (where they stand, or their home)")
    unit: str
    count: int


class PlaceOut(Out):
    id: int
    x: int | None
    y: int | None
    name: str | None


class MarchOut(Out):
    id: int
    kind: str = Field(description="attack, raid, reinforce or return")
    origin: PlaceOut
    target: PlaceOut
    depart_ms: int
    arrive_ms: int
    troops: dict[str, int] | None = Field(description="null on marches of another player")
    loot: dict[str, int] | None = Field(description="null on marches of another player")


class AllianceOut(Out):
    id: int
    name: str
    tag: str
    role: str = Field(description="founder, leader or member")
    members: list[int] = Field(description="the member players' ids, ascending")


class SettleMarchOut(Out):
    arrive_ms: int
    id: int
    x: int = Field(description="the field the settlers found a village on")
    y: int
    settlers: int
    depart_ms: int


class TradeOut(Out):
    id: int
    origin: PlaceOut
    target: PlaceOut
    resources: dict[str, int]
    merchants: int
    depart_ms: int
    arrive_ms: int
    return_ms: int = Field(description="when the merchants are home (once they arrived: exact)")
    returning: bool = Field(description="delivered; the merchants are on their way home")
    delivered: dict[str, int]
    lost: dict[str, int] = Field(description="what did not fit in the target's storage")


# ---- the parts


def _unread() -> AnySelect:
    unread = (
        select(func.count())
        .where(Report.player_id == players.c.id, Report.is_read == false())
        .scalar_subquery()
    )
    return select(players.c.id.label("player_id"), unread.label("unread_reports"))


def _unread_messages() -> AnySelect:
    unread = (
        select(func.count())
        .where(Message.recipient_id == players.c.id, Message.is_read == false())
        .scalar_subquery()
    )
    return select(players.c.id.label("player_id"), unread.label("unread_messages"))


def _invitations() -> AnySelect:
    count = (
        select(func.count()).where(AllianceInvitation.player_id == players.c.id).scalar_subquery()
    )
    return select(players.c.id.label("player_id"), count.label("alliance_invitations"))


def _alliance() -> AnySelect:
    m, other = AllianceMember, aliased(AllianceMember)
    members = select(json_list(other.player_id)).where(other.alliance_id == m.alliance_id)
    return select(
        m.player_id.label("player_id"),
        Alliance.id,
        Alliance.name,
        Alliance.tag,
        m.role,
        members.scalar_subquery().label("members"),
    ).join(Alliance, Alliance.id == m.alliance_id)


def _alliance_view(row: dict[str, Any], viewer_id: int) -> dict[str, Any]:
    return {**row, "members": sorted(int(p) for p in row["members"] or ())}


def _buildings() -> AnySelect:
    return select(Building.village_id.label("place_id"), Building.kind, Building.level)


def _build_queue() -> AnySelect:
    o = BuildOrder
    return select(o.village_id.label("place_id"), o.done_ms, o.id, o.kind, o.target_level,
                  o.started_ms)  # fmt: skip


def _training_queue() -> AnySelect:
    o = TrainingOrder
    return select(o.village_id.label("place_id"), o.done_ms, o.id, o.unit, o.count, o.started_ms)


def _troops_home() -> AnySelect:
    return select(Troop.village_id.label("place_id"), Troop.unit, Troop.count).where(
        Troop.village_id == Troop.home_village_id, Troop.count > 0
    )


def _reinforcements() -> AnySelect:
    """Other villages' troops standing in the village (by their home, then unit)."""
    return select(
        Troop.village_id.label("place_id"),
        Troop.home_village_id.label("village_id"),
        Troop.unit,
        Troop.count,
    ).where(Troop.village_id != Troop.home_village_id, Troop.count > 0)


def _troops_away() -> AnySelect:
    """The village's own troops standing in other villages (found by their home)."""
    return select(
        Troop.home_village_id.label("place_id"), Troop.village_id, Troop.unit, Troop.count
    ).where(Troop.village_id != Troop.home_village_id, Troop.count > 0)


def _marches(place: Any, **where: Any) -> AnySelect:
    """Marches by ``place`` (their origin or their target), with both ends' map data."""
    origin, target = aliased(places), aliased(places)
    m = March
    stmt = (
        select(
            place.label("place_id"),
            m.arrive_ms,
            m.id,
            m.origin_village_id,
            m.target_village_id,
            m.depart_ms,
            origin.c.x.label("origin_x"),
            origin.c.y.label("origin_y"),
            target.c.x.label("target_x"),
            target.c.y.label("target_y"),
            origin.c.player_id.label("origin_player_id"),
            m.kind,
            origin.c.name.label("origin_name"),
            target.c.name.label("target_name"),
            m.troops,
            m.loot,
        )
        .select_from(m)
        .outerjoin(origin, origin.c.id == m.origin_village_id)
        .outerjoin(target, target.c.id == m.target_village_id)
    )
    return (
        stmt.where(m.kind == "return") if where.get("returning") else stmt.where(m.kind != "return")
    )


def _settlers_out() -> AnySelect:
    """The village's settlers on their way to found a village (``refgame.settling``)."""
    m = SettleMarch
    return select(m.origin_village_id.label("place_id"), m.arrive_ms, m.id, m.x, m.y, m.settlers,
                  m.depart_ms)  # fmt: skip


def _march_view(row: dict[str, Any], viewer_id: int) -> dict[str, Any]:
    """A march as its player sees it: troops and loot only of the viewer's own marches
    (a march's origin is its troops' home, on the way back too)."""
    mine = row["origin_player_id"] == viewer_id
    return {
        "id": row["id"],
        "kind": row["kind"],
        "origin": {"id": row["origin_village_id"], "x": row["origin_x"], "y": row["origin_y"],
                   "name": row["origin_name"]},
        "target": {"id": row["target_village_id"], "x": row["target_x"], "y": row["target_y"],
                   "name": row["target_name"]},
        "depart_ms": row["depart_ms"],
        "arrive_ms": row["arrive_ms"],
        "troops": dict(row["troops"]) if mine else None,
        "loot": dict(row["loot"] or {}) if mine else None,
    }  # fmt: skip


def _merchants(free: bool) -> AnySelect:
    """Merchants of the village: ``level × MERCHANTS_PER_LEVEL``, less the busy ones if
    ``free`` (those of its trades, on the way there or back)."""
    total = Building.level * MERCHANTS_PER_LEVEL
    busy = (
        select(func.coalesce(func.sum(Trade.merchants), 0))
        .where(Trade.origin_village_id == Building.village_id)
        .scalar_subquery()
    )
    return select(
        Building.village_id.label("place_id"), (total - busy if free else total).label("n")
    ).where(Building.kind == "marketplace")


def _trades(place: Any, incoming: bool = False) -> AnySelect:
    """Trades by ``place`` (their origin, or their target while on the way there)."""
    origin, target = aliased(places), aliased(places)
    t = Trade
    stmt = (
        select(
            place.label("place_id"), t.arrive_ms, t.id, t.origin_village_id, t.target_village_id,
            origin.c.x.label("origin_x"), origin.c.y.label("origin_y"),
            origin.c.name.label("origin_name"), target.c.x.label("target_x"),
            target.c.y.label("target_y"), target.c.name.label("target_name"), t.resources,
            t.merchants, t.depart_ms, t.return_ms, cast(t.homebound, Integer).label("homebound"),
            t.delivered, t.lost,
        )
        .select_from(t)
        .outerjoin(origin, origin.c.id == t.origin_village_id)
        .outerjoin(target, target.c.id == t.target_village_id)
    )  # fmt: skip
    return stmt.where(t.homebound != true()) if incoming else stmt


def _trade_view(row: dict[str, Any], viewer_id: int) -> dict[str, Any]:
    return {
        "id": row["id"],
        "origin": {"id": row["origin_village_id"], "x": row["origin_x"], "y": row["origin_y"],
                   "name": row["origin_name"]},
        "target": {"id": row["target_village_id"], "x": row["target_x"], "y": row["target_y"],
                   "name": row["target_name"]},
        "resources": dict(row["resources"]),
        "merchants": row["merchants"],
        "depart_ms": row["depart_ms"],
        "arrive_ms": row["arrive_ms"],
        "return_ms": row["return_ms"],
        "returning": bool(row["homebound"]),
        "delivered": dict(row["delivered"] or {}),
        "lost": dict(row["lost"] or {}),
    }  # fmt: skip


def _order_view(row: dict[str, Any], viewer_id: int) -> dict[str, Any]:
    """An order with its id first and its end last (the client's order)."""
    done = row.pop("done_ms")
    return {"id": row.pop("id"), **row, "done_ms": done}


SNAPSHOT_PARTS = (
    SnapshotPart("unread_reports", _unread, shape="value", model=int),
    SnapshotPart("unread_messages", _unread_messages, shape="value", model=int),
    SnapshotPart("alliance_invitations", _invitations, shape="value", model=int),
    SnapshotPart("alliance", _alliance, shape="object", view=_alliance_view, model=AllianceOut),
    SnapshotPart("buildings", _buildings, shape="map", model=int),
    SnapshotPart("build_queue", _build_queue, view=_order_view, model=BuildOrderOut),
    SnapshotPart("troops", _troops_home, shape="map", model=int),
    SnapshotPart("reinforcements", _reinforcements, model=TroopsAtOut),
    SnapshotPart("troops_away", _troops_away, model=TroopsAtOut),
    SnapshotPart("training_queue", _training_queue, view=_order_view, model=TrainingOrderOut),
    # leaving the village (not on the way home)...
    SnapshotPart("marches_out", lambda: _marches(March.origin_village_id), view=_march_view,
                 model=MarchOut),
    # ... and reaching it: marches to it, and its own troops coming home
    SnapshotPart("marches_in", lambda: _marches(March.target_village_id), view=_march_view,
                 model=MarchOut),
    SnapshotPart("marches_in", lambda: _marches(March.origin_village_id, returning=True),
                 view=_march_view, model=MarchOut),
    SnapshotPart("settlers_out", _settlers_out, model=SettleMarchOut),
    SnapshotPart("merchants_total", lambda: _merchants(free=False), shape="value", model=int),
    SnapshotPart("merchants_free", lambda: _merchants(free=True), shape="value", model=int),
    # the village's merchants on the way (there or back), and merchants coming to it
    SnapshotPart("trades_out", lambda: _trades(Trade.origin_village_id), view=_trade_view,
                 model=TradeOut),
    SnapshotPart("trades_in", lambda: _trades(Trade.target_village_id, incoming=True),
                 view=_trade_view, model=TradeOut),
)  # fmt: skip
