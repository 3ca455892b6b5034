"""Rankings: players (and alliances) by population, attack points and defence points.

A periodic job (``RANKINGS_JOB``, every ``RANKINGS_EVERY_S``, once per world)
rewrites the ``rankings`` table in one transaction: for each kind, every player
with their value and rank (equal values share a rank, the next one skips:
1, 2, 2, 4). The values:

- ``population``: the sum of the building levels of all the player's villages
  (each level houses one inhabitant; resource fields count like buildings).
- ``attack`` / ``defence``: the player's battle points (``refgame.points``).

Readers get the last run's result (``GET /api/rankings``), never a half-written
one. Alliance rankings are computed when read from the players' rows, summed by
alliance membership.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from sqlalchemy import (
    BigInteger,
    String,
    cast,
    delete,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from gameapi import JobContext, Out, Query, QueryRoute, places, players
from gameapi.game import AnySelect
from refgame.models import Alliance, AllianceMember, Building, PlayerPoints, Ranking
from refgame.population import POPULATION

RANKINGS_JOB = "refgame.rankings"
RANKINGS_EVERY_S = 60  # how stale a ranking may be; a run reads every player once
KINDS: tuple[str, ...] = ("population", "attack", "defence")
MAX_LIMIT = 100  # rows per page of GET /api/rankings
MAX_PAGE = 10_000

Kind = Literal["population", "attack", "defence"]


# ---- the job ------------------------------------------------------------------------------


def _values(kind: str) -> AnySelect:
    """``(player_id, value)`` of every player for ``kind``."""
    if kind == "population":
        levels = (
            select(places.c.player_id, POPULATION.label("value"))
            .join(Building, Building.village_id == places.c.id)
            .where(places.c.player_id.is_not(None))
            .group_by(places.c.player_id)
            .subquery()
        )
        return select(players.c.id, func.coalesce(levels.c.value, 0)).outerjoin(
            levels, levels.c.player_id == players.c.id
        )
    column = PlayerPoints.attack_points if kind == "attack" else PlayerPoints.defence_points
    return select(players.c.id, func.coalesce(column, 0)).outerjoin(
        PlayerPoints, PlayerPoints.player_id == players.c.id
    )


async def compute_rankings(sessions: async_sessionmaker[AsyncSession], now_ms: int) -> None:
    """Rewrite every ranking from the current state: one INSERT ... SELECT per kind."""
    async with sessions() as session, session.begin():
        await session.execute(delete(Ranking))
        for kind in KINDS:
            values = _values(kind).subquery()
            player_id, value = values.c
            ranked = select(
                literal(kind, String(16)),
                player_id,
                func.rank().over(order_by=value.desc()),
                value,
                literal(now_ms, BigInteger),
            )
            columns = ["kind", "player_id", "rank", "value", "computed_ms"]
            await session.execute(insert(Ranking).from_select(columns, ranked))


async def rankings_job(ctx: JobContext) -> None:
    await compute_rankings(ctx.sessions, ctx.clock.now_ms())


# ---- reading ------------------------------------------------------------------------------


class RankingRowOut(Out):
    rank: int = Field(description="equal values share a rank; the next one skips")
    value: int
    player_id: int | None = Field(None, description="a player ranking's row")
    name: str = Field(description="the player's or the alliance's name")
    alliance_id: int | None = Field(None, description="an alliance ranking's row")
    tag: str | None = None
    members: int | None = None


class OwnRankOut(Out):
    rank: int
    value: int
    alliance_id: int | None = Field(None, description="of=alliance: the player's alliance")


class RankingsOut(Out):
    kind: Kind
    of: Literal["player", "alliance"]
    page: int
    limit: int
    total: int
    computed_ms: int | None = Field(description="when the ranking job last ran; null: never")
    rows: list[RankingRowOut]
    me: OwnRankOut | None = Field(description="the viewing player's (or alliance's) rank")


class RankingsQuery(Query):
    kind: Kind = "population"
    of: Literal["player", "alliance"] = "player"
    page: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 1
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 20


async def player_ranking(
    session: AsyncSession, player_id: int, kind: str, page: int, limit: int
) -> dict[str, Any]:
    """One page of a player ranking, and the viewing player's own row."""
    r = Ranking
    where = r.kind == kind
    rows = await session.execute(
        select(r.rank, r.player_id, players.c.name, r.value)
        .join(players, players.c.id == r.player_id)
        .where(where)
        .order_by(r.rank, r.player_id)
        .offset((page - 1) * limit)
        .limit(limit)
    )
    total, computed_ms = (
        await session.execute(select(func.count(), func.max(r.computed_ms)).where(where))
    ).one()
    me = (
        await session.execute(select(r.rank, r.value).where(where, r.player_id == player_id))
    ).first()
    return {
        "rows": [dict(row._mapping) for row in rows],
        "total": total,
        "computed_ms": computed_ms,
        "me": dict(me._mapping) if me else None,
    }


async def alliance_ranking(
    session: AsyncSession, player_id: int, kind: str, page: int, limit: int
) -> dict[str, Any]:
    """One page of an alliance ranking: the members' player values summed per alliance,
    ranked like players; ``me`` is the viewing player's alliance."""
    alliances, members = Alliance.__table__, AllianceMember.__table__
    r = Ranking
    sums = (
        select(
            members.c.alliance_id,
            cast(func.sum(r.value), BigInteger).label("value"),  # not numeric on PostgreSQL
            func.count().label("members"),
        )
        .join(r, r.player_id == members.c.player_id)
        .where(r.kind == kind)
        .group_by(members.c.alliance_id)
        .subquery()
    )
    ranked = select(
        func.rank().over(order_by=sums.c.value.desc()).label("rank"),
        sums.c.alliance_id,
        alliances.c.name,
        alliances.c.tag,
        sums.c.value,
        sums.c.members,
    ).join(alliances, alliances.c.id == sums.c.alliance_id)
    table = ranked.subquery()
    rows = await session.execute(
        select(table)
        .order_by(table.c.rank, table.c.alliance_id)
        .offset((page - 1) * limit)
        .limit(limit)
    )
    total = (await session.execute(select(func.count()).select_from(table))).scalar_one()
    mine = select(members.c.alliance_id).where(members.c.player_id == player_id)
    me = (
        await session.execute(
            select(table.c.rank, table.c.alliance_id, table.c.value).where(
                table.c.alliance_id.in_(mine.scalar_subquery())
            )
        )
    ).first()
    computed_ms = (
        await session.execute(select(func.max(r.computed_ms)).where(r.kind == kind))
    ).scalar()
    return {
        "rows": [dict(row._mapping) for row in rows],
        "total": total,
        "computed_ms": computed_ms,
        "me": dict(me._mapping) if me else None,
    }


async def rankings(session: AsyncSession, player_id: int, query: RankingsQuery) -> dict[str, Any]:
    """``GET /api/rankings``: a page of a ranking as the last ranking job left it."""
    if query.of == "alliance":
        page = await alliance_ranking(session, player_id, query.kind, query.page, query.limit)
    else:
        page = await player_ranking(session, player_id, query.kind, query.page, query.limit)
    return {"kind": query.kind, "of": query.of, "page": query.page, "limit": query.limit, **page}


QUERIES = [
    QueryRoute(
        "rankings",
        RankingsQuery,
        rankings,
        "Rankings by population, attack or defence points",
        response_model=RankingsOut,
    ),
]
