"""``GET /api/map``: the villages in a square window around a coordinate.

Each place comes with its owner (id, name, whether a bot) and, when the game
declares ``place_size``, the size the game gives it (a village's population).
"""

from __future__ import annotations

from aiohttp import web
from pydantic import Field
from sqlalchemy import literal, select

from db.models import Player, Village
from webfront.auth import authenticate
from webfront.codec import respond
from webfront.errors import ApiError
from webfront.routing import Endpoint
from webfront.state import ENGINE, GAME, SETTINGS
from webfront.validation import Out, Query, read_query

MAX_WINDOW_RADIUS = 15  # at most 31 x 31 cells per request
_COORD = 2000  # the largest MAP_RADIUS settings allow


class MapQuery(Query):
    x: int = Field(ge=-_COORD, le=_COORD, description="window centre; within the map")
    y: int = Field(ge=-_COORD, le=_COORD, description="window centre; within the map")
    radius: int = Field(7, ge=0, le=MAX_WINDOW_RADIUS, description="half the window's side")


class MapVillageOut(Out):
    id: int
    name: str
    x: int
    y: int
    player_id: int | None
    player_name: str | None
    player_is_bot: bool = Field(description="the owner is a generated bot (false: no owner)")
    size: int | None = Field(description="the game's size of the place; null: none declared")


class MapOut(Out):
    min_x: int
    max_x: int
    min_y: int
    max_y: int
    map_radius: int
    villages: list[MapVillageOut]


async def map_window(request: web.Request) -> web.Response:
    await authenticate(request)
    query = read_query(request, MapQuery)
    radius = request.app[SETTINGS].map_radius
    if abs(query.x) > radius or abs(query.y) > radius:
        raise ApiError(
            422, "off_map", f"x and y must be within -{radius}..{radius}: the map's extent"
        )
    min_x, max_x = max(-radius, query.x - query.radius), min(radius, query.x + query.radius)
    min_y, max_y = max(-radius, query.y - query.radius), min(radius, query.y + query.radius)
    place_size = request.app[GAME].place_size
    size = place_size(Village.__table__.c.id) if place_size else literal(None)
    async with request.app[ENGINE].connect() as conn:
        rows = await conn.execute(
            select(
                Village.id,
                Village.name,
                Village.x,
                Village.y,
                Village.player_id,
                Player.name,
                Player.is_bot,
                size,
            )
            .outerjoin(Player, Player.id == Village.player_id)
            .where(Village.x.between(min_x, max_x), Village.y.between(min_y, max_y))
            .order_by(Village.y, Village.x)
        )
        villages = [
            {
                "id": vid,
                "name": name,
                "x": x,
                "y": y,
                "player_id": pid,
                "player_name": pname,
                "player_is_bot": bool(bot),
                "size": None if n is None else int(n),
            }
            for vid, name, x, y, pid, pname, bot, n in rows
        ]
    return respond(
        request,
        {
            "min_x": min_x,
            "max_x": max_x,
            "min_y": min_y,
            "max_y": max_y,
            "map_radius": radius,
            "villages": villages,
        },
    )


ENDPOINTS = [
    Endpoint(
        "GET",
        "/api/map",
        map_window,
        "Villages in a square window of the map (clipped to the map)",
        "game",
        query=MapQuery,
        response=MapOut,
    ),
]
