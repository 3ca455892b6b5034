"""refgame's workload for ``python -m bench queue --handlers game``: attacks due at once.

The same workload the published figures were measured with: every village sends
its army, split in equal marches, to other villages; what does not divide evenly
stays home, so every target has a few defenders (battles with losses on both
sides, loot, two reports, a return march).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from gameapi import GameBench, Tx
from refgame.handlers import MARCH
from refgame.models import March, Report, Troop

CHUNK = 10_000  # rows per statement (SQLite's bound-parameter limit, asyncpg's batches)


async def prepare(
    army: Mapping[str, int], tx: Tx, place_ids: Sequence[int], events: int, due_ms: int
) -> None:
    """``events`` attacks due at ``due_ms`` from villages that each hold ``army`` (a
    generated bot's): the first ``events % villages`` villages send one more march
    than the others; march n of a village goes to a village a different hop away."""
    villages = len(place_ids)
    per_village = math.ceil(events / villages)
    share = {u: n // per_village for u, n in army.items() if n // per_village > 0}
    if not share or villages < 2:
        raise ValueError(
            f"{events:,} marches from {villages:,} villages is {per_village} per village, more "
            f"than a village's army can be split in; use more --villages"
        )
    extra = events % villages  # the first `extra` villages send one more march
    sends = [(place_ids[:extra], per_village), (place_ids[extra:], per_village - 1)]
    if extra == 0:
        sends = [(place_ids, per_village)]
    for senders, marches in sends:
        if marches == 0:
            continue
        for start in range(0, len(senders), CHUNK):
            chunk = list(senders[start : start + CHUNK])
            for unit, n in share.items():
                await tx.session.execute(
                    update(Troop)
                    .where(
                        Troop.unit == unit,
                        Troop.village_id.in_(chunk),
                        Troop.village_id == Troop.home_village_id,
                    )
                    .values(count=Troop.count - marches * n)
                )
    for start in range(0, events, CHUNK):
        rows, targets = [], []
        for i in range(start, min(events, start + CHUNK)):
            origin = i % villages
            hop = 1 + (i // villages) * 7 % (villages - 1)  # a different target per march
            target = place_ids[(origin + hop) % villages]
            targets.append(target)
            rows.append(
                {"kind": "attack", "origin_village_id": place_ids[origin],
                 "target_village_id": target, "troops": dict(share), "loot": {},
                 "depart_ms": due_ms - 60_000, "arrive_ms": due_ms, "event_id": 0}
            )  # fmt: skip
        found = await tx.session.execute(
            insert(March).returning(March.id, sort_by_parameter_order=True), rows
        )
        march_ids = list(found.scalars())
        # as the send command: the march row, then its arrival event, then the event's id
        event_ids = [
            tx.schedule(MARCH, target, due_ms, {"march_id": march_id})
            for target, march_id in zip(targets, march_ids, strict=True)
        ]
        await tx.session.execute(
            update(March),
            [{"id": m, "event_id": e} for m, e in zip(march_ids, event_ids, strict=True)],
        )


async def counts(conn: AsyncConnection) -> dict[str, int]:
    reports = await conn.scalar(select(func.count()).select_from(Report))
    returns = await conn.scalar(select(func.count()).where(March.kind == "return"))
    return {"reports": int(reports or 0), "return_marches": int(returns or 0)}


def workload(army: Mapping[str, int]) -> GameBench:
    """The bench workload of a world whose generated villages hold ``army``."""
    return GameBench(kind=MARCH, prepare=partial(prepare, army), counts=counts)
