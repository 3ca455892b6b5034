from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from sqlalchemy import func, select

from common.amounts import SCALE
from db.models import Player, Village
from db.worldgen import NEIGHBOUR_FIELDS, free_coordinates, generate_world, spots_near
from gameapi import PlaceTemplate
from refgame.models import Building, Troop
from refgame.resources import STOCKS


def _rows(village_id: int) -> dict[Any, list[dict[str, Any]]]:
    """The game's own rows of a new village: two buildings and a troop."""
    return {
        Building.__table__: [
            {"village_id": village_id, "kind": kind, "level": 1}
            for kind in ("woodcutter", "warehouse")
        ],
        Troop.__table__: [
            {"village_id": village_id, "home_village_id": village_id, "unit": "spearman",
             "count": 10}
        ],
    }  # fmt: skip


TEMPLATE = PlaceTemplate(
    stock={"wood": 500, "clay": 500, "iron": 500, "crop": 900},
    rates={"wood": 30, "clay": 30, "iron": 30, "crop": 20},
    caps={"warehouse": 800, "granary": 800},
    rows=_rows,
)


async def _count(engine, model) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(model))).scalar() or 0)


async def test_generates_players_villages_and_their_rows(engine, settings) -> None:
    summary = await generate_world(
        engine,
        stocks=STOCKS,
        players=40,
        villages_per_player=2,
        template=TEMPLATE,
        shards=4,
        map_radius=20,
        seed=1,
    )
    assert (summary.players, summary.villages) == (40, 80)
    assert await _count(engine, Player) == 40
    assert await _count(engine, Village) == 80
    assert await _count(engine, STOCKS.table) == 80
    assert await _count(engine, Building) == 160
    assert await _count(engine, Troop) == 80
    async with engine.connect() as conn:
        rows = (await conn.execute(select(STOCKS.table))).all()
        coords = (await conn.execute(select(Village.x, Village.y))).all()
    assert all(r.shard == r.village_id % 4 for r in rows)
    assert {r.crop for r in rows} == {800 * SCALE}  # the start stock is capped by the granary
    assert {r.wood_rate for r in rows} == {30}
    assert len(set(coords)) == 80
    assert all(abs(x) <= 20 and abs(y) <= 20 for x, y in coords)


async def test_second_run_appends_without_collisions(engine) -> None:
    await generate_world(
        engine, stocks=STOCKS, players=10, template=TEMPLATE, shards=4, map_radius=10, seed=2
    )
    second = await generate_world(
        engine, stocks=STOCKS, players=10, template=TEMPLATE, shards=4, map_radius=10
    )
    assert second.first_village_id == 11
    assert await _count(engine, Village) == 20
    async with engine.connect() as conn:
        assert len(set((await conn.execute(select(Village.x, Village.y))).all())) == 20


async def test_a_full_map_is_a_clear_error(engine) -> None:
    with pytest.raises(ValueError, match="raise MAP_RADIUS"):
        await generate_world(
            engine, stocks=STOCKS, players=30, template=TEMPLATE, shards=4, map_radius=2
        )
    assert await _count(engine, Village) == 0


def test_free_coordinates_avoids_taken_spots() -> None:
    import random

    taken = {(0, 0), (1, 1)}
    coords = free_coordinates(taken, 7, 1, random.Random(0))
    assert len(coords) == 7 and (0, 0) not in coords and (1, 1) not in coords


def _place(anchor: tuple[int, int], taken: set[tuple[int, int]], radius: int) -> tuple[int, int]:
    reach = 2
    while not (spots := spots_near(anchor, taken, reach, radius)):
        reach *= 2
    return spots[0]


@pytest.mark.parametrize("bots", [0, 300])
def test_players_placed_one_after_another_grow_a_disc_around_the_centre(bots: int) -> None:
    """Each beside the last (two fields, or the nearest free spot when a crowd of
    randomly placed bots fills those), all within a small ring of the centre."""
    radius, rng = 30, random.Random(7)
    taken = set(free_coordinates(set(), bots, radius, rng))
    anchor = (0, 0)
    placed: list[tuple[int, int]] = []
    for _ in range(300):
        spot = _place(anchor, taken, radius)
        taken.add(spot)
        placed.append(spot)
        anchor = spot
    steps = [math.dist(a, b) for a, b in itertools.pairwise(placed)]
    assert max(steps) <= (NEIGHBOUR_FIELDS if bots == 0 else 3)
    # 300 players fill a disc of radius ~10: none is placed far beyond it
    assert max(math.hypot(x, y) for x, y in placed) <= 15
    if bots == 0:
        assert placed[0] == (0, 0)


def test_spots_near_a_full_map_is_empty() -> None:
    taken = {(x, y) for x in range(-1, 2) for y in range(-1, 2)}
    assert spots_near((0, 0), taken, 4, 1) == []
    assert spots_near((0, 0), taken - {(1, 1)}, 4, 1) == [(1, 1)]
