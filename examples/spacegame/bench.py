"""The space game's workload for ``python -m bench queue --handlers game``.

``events`` attacks of light fighters arrive at once, spread over the generated
planets: each planet sends fleets of ``SENT`` fighters and keeps ``HOME`` to
defend, so every arrival is a battle with losses, loot, two reports and (for
the survivors) a flight home.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

import gameapi
from examples.spacegame.commands import FLEET_ARRIVE
from examples.spacegame.models import Fleet, Report, Ships

SENT, HOME = 10, 10  # light fighters in each fleet and left on each planet
FLIGHT_MS = 60_000  # the flight home ends after the measured arrivals
CHUNK = 10_000  # rows per statement (SQLite's bound-parameter limit)


async def prepare(tx: gameapi.Tx, place_ids: Sequence[int], events: int, due_ms: int) -> None:
    """Planet i's fleet n attacks the planet a different hop away, as ``send_fleet``
    would write it (the ships leave the planet, the fleet row holds them and the id
    of its arrival event). Battle seeds are fixed, so runs are comparable."""
    planets = len(place_ids)
    if planets < 2:
        raise ValueError("attacks need at least 2 planets; use more --villages")
    places = gameapi.places.c
    owners: dict[int, int] = {}
    for start in range(0, planets, CHUNK):
        chunk = list(place_ids[start : start + CHUNK])
        found = await tx.session.execute(
            select(places.id, places.player_id).where(places.id.in_(chunk))
        )
        owners.update((place, player) for place, player in found.all())
        # what stays home once the fleets have taken off
        await tx.session.execute(
            update(Ships)
            .where(Ships.place_id.in_(chunk), Ships.name == "light_fighter")
            .values(count=HOME)
        )
    for start in range(0, events, CHUNK):
        rows = []
        for i in range(start, min(events, start + CHUNK)):
            origin = i % planets
            hop = 1 + (i // planets) * 7 % (planets - 1)
            target = place_ids[(origin + hop) % planets]
            rows.append(
                {"owner_id": owners[place_ids[origin]], "origin_id": place_ids[origin],
                 "target_id": target, "mission": "attack", "state": "out",
                 "ships": {"light_fighter": SENT}, "metal": 0, "crystal": 0, "deuterium": 0,
                 "speed_pct": 100, "depart_ms": due_ms - FLIGHT_MS, "arrive_ms": due_ms,
                 "event_id": tx.schedule(FLEET_ARRIVE, target, due_ms), "seed": 1 + i}
            )  # fmt: skip
        await tx.session.execute(insert(Fleet), rows)


async def counts(conn: AsyncConnection) -> dict[str, int]:
    reports = await conn.scalar(select(func.count()).select_from(Report))
    home = await conn.scalar(select(func.count()).where(Fleet.state == "back"))
    return {"reports": int(reports or 0), "return_flights": int(home or 0)}


BENCH = gameapi.GameBench(kind=FLEET_ARRIVE, prepare=prepare, counts=counts)
