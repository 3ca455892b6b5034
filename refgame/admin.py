"""The reference game's hooks for the operator console (``webfront.admin.hooks``).

``admin_timeline`` lists a village's build and training orders, the marches leaving
and reaching it (its settlers on their way too), and its troops; ``replay_report``
fights a battle report again from its stored inputs and seed and says whether the
result equals the stored one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from refgame.battle import BattleResult
from refgame.battle import replay_report as replay_battle
from refgame.models import BuildOrder, March, Report, SettleMarch, TrainingOrder, Troop


async def admin_timeline(session: AsyncSession, village_id: int) -> dict[str, list[dict[str, Any]]]:
    builds = (
        await session.execute(
            select(BuildOrder)
            .where(BuildOrder.village_id == village_id)
            .order_by(BuildOrder.done_ms)
        )
    ).scalars()
    trainings = (
        await session.execute(
            select(TrainingOrder)
            .where(TrainingOrder.village_id == village_id)
            .order_by(TrainingOrder.done_ms)
        )
    ).scalars()
    marches = (
        await session.execute(
            select(March)
            .where(
                or_(March.origin_village_id == village_id, March.target_village_id == village_id)
            )
            .order_by(March.arrive_ms)
        )
    ).scalars()
    settlers = (
        await session.execute(
            select(SettleMarch)
            .where(SettleMarch.origin_village_id == village_id)
            .order_by(SettleMarch.arrive_ms)
        )
    ).scalars()
    troops = (
        await session.execute(
            select(Troop).where(
                or_(Troop.village_id == village_id, Troop.home_village_id == village_id)
            )
        )
    ).scalars()
    return {
        "orders": [
            *(
                {
                    "kind": "build",
                    "id": b.id,
                    "what": f"{b.kind} to level {b.target_level}",
                    "started_ms": b.started_ms,
                    "done_ms": b.done_ms,
                }
                for b in builds
            ),
            *(
                {
                    "kind": "training",
                    "id": t.id,
                    "what": f"{t.count} {t.unit}",
                    "started_ms": t.started_ms,
                    "done_ms": t.done_ms,
                }
                for t in trainings
            ),
        ],
        "marches": [
            {
                "kind": m.kind,
                "id": m.id,
                "direction": "out" if m.origin_village_id == village_id else "in",
                "origin_village_id": m.origin_village_id,
                "target_village_id": m.target_village_id,
                "troops": m.troops,
                "loot": m.loot,
                "depart_ms": m.depart_ms,
                "arrive_ms": m.arrive_ms,
                "event_id": str(m.event_id),
            }
            for m in marches
        ]
        + [
            {
                "kind": "found",
                "id": s.id,
                "direction": "out",
                "origin_village_id": s.origin_village_id,
                "target_village_id": None,
                "field": {"x": s.x, "y": s.y},
                "troops": {"settler": s.settlers},
                "loot": {},
                "depart_ms": s.depart_ms,
                "arrive_ms": s.arrive_ms,
                "event_id": str(s.event_id),
            }
            for s in settlers
        ],
        "troops": [
            {
                "unit": t.unit,
                "count": t.count,
                "in_village_id": t.village_id,
                "home_village_id": t.home_village_id,
            }
            for t in troops
        ],
    }


async def replay_report(session: AsyncSession, report_id: int) -> dict[str, Any] | None:
    """None: no such report. A battle report: ``equal`` says whether the replay from its
    seed gives exactly the stored result; any other report: ``equal`` is None."""
    report = (await session.execute(select(Report).where(Report.id == report_id))).scalar()
    if report is None:
        return None
    body = report.body
    if not isinstance(body, dict) or body.get("type") != "battle" or "battle" not in body:
        return {"equal": None, "reason": f"a {report.kind} report holds no battle to replay"}
    try:
        stored = BattleResult.from_dict(body["battle"])
        replayed = replay_battle(body)
    except (KeyError, TypeError, ValueError) as exc:
        return {"equal": False, "reason": f"the stored battle cannot be replayed: {exc}"}
    return {
        "equal": replayed == stored,
        "seed": str(stored.seed),
        "ruleset": body.get("ruleset"),
        "stored": stored.to_dict(),
        "replayed": replayed.to_dict(),
    }
