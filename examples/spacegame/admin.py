"""The operator console's view of the space game (``Game.admin_timeline``,
``Game.replay_report``): a planet's orders and fleets, and battle replays."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from examples.spacegame.battle import Side, attack_loot, fight
from examples.spacegame.models import Fleet, Order, Report


async def timeline(session: AsyncSession, place_id: int) -> dict[str, list[dict[str, Any]]]:
    orders = await session.execute(
        select(Order.queue, Order.item, Order.amount, Order.started_ms, Order.done_ms)
        .where(Order.place_id == place_id)
        .order_by(Order.done_ms)
    )
    fleets = await session.execute(
        select(
            Fleet.id,
            Fleet.owner_id,
            Fleet.origin_id,
            Fleet.target_id,
            Fleet.mission,
            Fleet.state,
            Fleet.ships,
            Fleet.depart_ms,
            Fleet.arrive_ms,
        )
        .where(or_(Fleet.origin_id == place_id, Fleet.target_id == place_id))
        .order_by(Fleet.arrive_ms)
    )
    return {
        "orders": [{"kind": r.queue, **r._asdict()} for r in orders],
        "fleets": [{"kind": r.mission, "time_ms": r.arrive_ms, **r._asdict()} for r in fleets],
    }


def replay(body: dict[str, Any]) -> dict[str, Any]:
    """The outcome of a stored battle, fought again from its inputs and seed."""
    attacker, defender = Side.from_dict(body["attacker"]), Side.from_dict(body["defender"])
    outcome = fight(attacker, defender, body["seed"])
    return {
        "winner": outcome.winner,
        "rounds": outcome.rounds,
        "attacker_losses": outcome.losses(attacker, outcome.attacker_left),
        "defender_losses": outcome.losses(defender, outcome.defender_left),
        "loot": attack_loot(outcome, body["defender_stock"]),
    }


async def replay_report(session: AsyncSession, report_id: int) -> dict[str, Any] | None:
    found = (
        await session.execute(select(Report.kind, Report.body).where(Report.id == report_id))
    ).first()
    if found is None:
        return None
    if found.kind != "battle":
        return {"equal": None, "reason": f"a {found.kind} report has no battle to replay"}
    replayed = replay(found.body)
    stored = {k: found.body[k] for k in replayed}
    return {"equal": stored == replayed, "stored": stored, "replayed": replayed}
