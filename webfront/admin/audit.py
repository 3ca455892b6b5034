"""The audit log: every operator action, who did it, to what, when, and how it ended.

An entry is written in the action's own transaction where the action is a database
change (a ban), so an action and its record commit together; actions on Redis (a dead
letter) write theirs right after, with the outcome.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from db.models import AuditEntry
from webfront.admin.operators import OperatorRow


async def record(
    db: AsyncSession | AsyncConnection,
    operator: OperatorRow,
    action: str,
    target: str,
    detail: dict[str, Any],
    now_ms: int,
) -> None:
    await db.execute(
        insert(AuditEntry).values(
            operator_id=operator.id,
            operator_name=operator.name,
            action=action,
            target=target[:64],
            detail=detail,
            created_ms=now_ms,
        )
    )


async def recent(
    engine: AsyncEngine, limit: int, before_id: int | None = None
) -> list[dict[str, Any]]:
    """The newest entries first."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(AuditEntry.id < before_id)
    async with AsyncSession(engine) as session:
        rows = (await session.execute(query)).scalars().all()
    return [
        {
            "id": r.id,
            "operator": r.operator_name,
            "action": r.action,
            "target": r.target,
            "detail": r.detail,
            "at_ms": r.created_ms,
        }
        for r in rows
    ]
