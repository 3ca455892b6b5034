"""``GET /api/reports`` (a page of one's own reports) and ``GET /api/reports/{id}``.

Reading a report marks it read and bumps the player's snapshot version (the
snapshot carries the unread count). The reports are the game's table ``reports``,
found through the loaded game (``Game.tables``); these routes stay here until a
game's query routes can take a path id and write. Another player's report is 404, exactly
like a report that does not exist.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import Table, case, false, func, select, update

from common.snapshot_versions import bump_versions
from webfront.auth import authenticate
from webfront.codec import respond
from webfront.errors import not_found
from webfront.routing import Endpoint
from webfront.state import CLOCK, CONFIG, ENGINE, GAME, LOCAL_CACHE, REDIS, SETTINGS
from webfront.validation import Out, Query, path_id, read_query

MAX_PAGE = 10_000


class ReportsQuery(Query):
    page: int = Field(1, ge=1, le=MAX_PAGE)
    per_page: int = Field(20, ge=1, le=100)


class ReportSummaryOut(Out):
    id: int
    kind: str
    title: str
    created_ms: int
    is_read: bool


class ReportsOut(Out):
    page: int
    per_page: int
    total: int
    unread: int
    reports: list[ReportSummaryOut]


class ReportOut(Out):
    id: int
    kind: str
    title: str
    body: dict[str, Any]
    created_ms: int
    is_read: bool


def _reports(request: web.Request) -> Table:
    """The game's ``reports`` table (id, player_id, kind, title, body, created_ms,
    is_read): the game keeps its players' reports; a game without one has none (404)."""
    tables = request.app[GAME].tables
    table = None if tables is None else tables.tables.get("reports")
    if table is None:
        raise not_found("report")
    return table


async def list_reports(request: web.Request) -> web.Response:
    player_id = await authenticate(request)
    table = _reports(request)
    Report = table.c
    query = read_query(request, ReportsQuery)
    per_page = min(query.per_page, request.app[CONFIG].reports_max_per_page)
    mine = Report.player_id == player_id
    async with request.app[ENGINE].connect() as conn:
        counts = (
            await conn.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(case((Report.is_read == false(), 1), else_=0)), 0),
                ).where(mine)
            )
        ).one()
        rows = await conn.execute(
            select(Report.id, Report.kind, Report.title, Report.created_ms, Report.is_read)
            .where(mine)
            .order_by(Report.created_ms.desc(), Report.id.desc())
            .limit(per_page)
            .offset((query.page - 1) * per_page)
        )
        reports = [
            {"id": r.id, "kind": r.kind, "title": r.title, "created_ms": r.created_ms,
             "is_read": bool(r.is_read)}
            for r in rows
        ]  # fmt: skip
    return respond(
        request,
        {
            "page": query.page,
            "per_page": per_page,
            "total": int(counts[0]),
            "unread": int(counts[1]),
            "reports": reports,
        },
    )


async def get_report(request: web.Request) -> web.Response:
    player_id = await authenticate(request)
    table = _reports(request)
    Report = table.c
    report_id = path_id(request, "id", "report")
    mine = (Report.id == report_id) & (Report.player_id == player_id)
    async with request.app[ENGINE].begin() as conn:
        marked = await conn.execute(
            update(table).where(mine, Report.is_read == false()).values(is_read=True)
        )
        row = (
            await conn.execute(
                select(Report.id, Report.kind, Report.title, Report.body, Report.created_ms).where(
                    mine
                )
            )
        ).first()
    if row is None:
        raise not_found("report")
    if marked.rowcount:
        clock = request.app[CLOCK]
        await bump_versions(
            request.app[REDIS], request.app[SETTINGS].redis_prefix, [player_id], clock.now_ms()
        )
        request.app[LOCAL_CACHE].forget_versions([player_id])
    return respond(
        request,
        {
            "id": row.id,
            "kind": row.kind,
            "title": row.title,
            "body": row.body,
            "created_ms": row.created_ms,
            "is_read": True,
        },
    )


ENDPOINTS = [
    Endpoint(
        "GET",
        "/api/reports",
        list_reports,
        "A page of the player's reports, newest first",
        "reports",
        query=ReportsQuery,
        response=ReportsOut,
    ),
    Endpoint(
        "GET",
        "/api/reports/{id}",
        get_report,
        "One of the player's reports; marks it read",
        "reports",
        response=ReportOut,
        errors=(404,),
    ),
]
