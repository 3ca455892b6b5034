"""The reference game's timed-event handlers, registered on the task server.

Event kinds and what they change (each at its due time, in the village it is
scheduled for, so production changes are exact):

- ``build_done`` (payload ``order_id``): the building reaches its level; a
  field's production or a storage cap changes.
- ``train_done`` (``order_id``): the units join the village; upkeep rises.
- ``march`` (``march_id``): a march arrives. At its target: a battle (attack,
  raid) or a reinforcement. At home (a return): troops and loot come home.
- ``troops_lost`` (``lost``): the home village learns that its troops died
  away; upkeep falls. The news travels back at the dead troops' speed, and
  the home village feeds them until it arrives.
- ``starvation``: the granary ran dry with net crop negative; troops at home
  die, highest upkeep first, until net crop is back at zero or above.

When an operator drops a dead ``build_done`` or ``train_done``, its order goes
and its cost is refunded; a dropped ``march`` brings its troops and loot home
at once; a dropped ``troops_lost`` stops the dead troops' upkeep at once
(``COMPENSATIONS``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Table,
    Text,
    any_,
    bindparam,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from common.amounts import to_fixed
from common.queue import Event
from common.queue.handlers import Handler, HandlerRegistry
from common.queue.tx import Tx
from common.settings import Settings
from db import driver
from db.driver import rows
from db.models import Village
from db.stock import RateChange
from gameapi import JobContext
from gameserver.retention import prune_rows
from refgame import rankings, state
from refgame.batch import BatchState
from refgame.batch_io import MarchRow, batch_io
from refgame.battle import (
    battle_loot,
    battle_reports,
    new_seed,
    reinforcement_report,
    resolve_battle,
    split_losses,
)
from refgame.buildings import FIELD_KINDS, build_cost
from refgame.economy import (
    field_production,
    starvation_time_ms,
    starve,
    stock_at,
    storage_capacity,
    visible_stock,
)
from refgame.models import Building, BuildOrder, March, Report, TrainingOrder
from refgame.points import award, battle_points
from refgame.resources import STOCKS
from refgame.travel import march_duration_ms, return_march, shortest_follow_up_ms
from refgame.units import total_upkeep, train_cost

BUILD_DONE = "build_done"
TRAIN_DONE = "train_done"
MARCH = "march"
TROOPS_LOST = "troops_lost"
STARVATION = state.STARVATION
RESOURCE_OF_FIELD = {kind: res for res, kind in FIELD_KINDS.items()}


def _side(village: state.VillageInfo) -> dict[str, Any]:
    return {
        "player_id": village.player_id,
        "village_id": village.id,
        "name": village.name,
        "x": village.x,
        "y": village.y,
    }


def _owner(village_id: Any) -> ColumnElement[Any]:
    """The player of the village ``village_id`` (a column), as a scalar subquery."""
    return select(Village.player_id).where(Village.id == village_id).scalar_subquery()


# An order ends with its event: its row is taken (deleted, read back with its village's
# owner, whose snapshot it changes), and the statements are built once (``db.driver``),
# as these handlers run for most events. These take one order and set one level (SQLite);
# PostgreSQL's below take a batch's.
_ORDER = bindparam("order_id", type_=BigInteger)
_B = cast(Table, Building.__table__)
_TAKE_BUILD = (
    delete(BuildOrder).where(BuildOrder.id == _ORDER)
    .returning(BuildOrder.kind, BuildOrder.target_level, _owner(BuildOrder.village_id))
)  # fmt: skip
_TAKE_TRAINING = (
    delete(TrainingOrder).where(TrainingOrder.id == _ORDER)
    .returning(TrainingOrder.unit, TrainingOrder.count, _owner(TrainingOrder.village_id))
)  # fmt: skip
_BUILDING = (_B.c.village_id == bindparam("b_village", type_=BigInteger)) & (
    _B.c.kind == bindparam("b_kind")
)
_LEVEL = select(_B.c.level).where(_BUILDING)
_SET_LEVEL = update(_B).where(_BUILDING).values(level=bindparam("new_level"))

# A batch of orders ends in a few statements whatever its size: ids and values travel as
# arrays, and the levels are set with the old ones given back by one UPDATE (a self-join)
_ORDERS = bindparam("order_ids", type_=ARRAY(BigInteger))
_TAKE_BUILDS = (
    delete(BuildOrder).where(BuildOrder.id == any_(_ORDERS))
    .returning(BuildOrder.id, BuildOrder.kind, BuildOrder.target_level,
               _owner(BuildOrder.village_id))
)  # fmt: skip
_TAKE_TRAININGS = (
    delete(TrainingOrder).where(TrainingOrder.id == any_(_ORDERS))
    .returning(TrainingOrder.id, TrainingOrder.unit, TrainingOrder.count,
               _owner(TrainingOrder.village_id))
)  # fmt: skip
_TARGETS = select(
    func.unnest(bindparam("swap_villages", type_=ARRAY(BigInteger))).label("village_id"),
    func.unnest(bindparam("swap_kinds", type_=ARRAY(Text))).label("kind"),  # text[]: no lookup
    func.unnest(bindparam("swap_levels", type_=ARRAY(BigInteger))).label("level"),
).subquery("targets")
_OLD = _B.alias("old")
_SWAP_LEVELS = (
    update(_B)
    .where(
        _B.c.village_id == _TARGETS.c.village_id, _B.c.kind == _TARGETS.c.kind,
        _OLD.c.village_id == _B.c.village_id, _OLD.c.kind == _B.c.kind,
    )
    .values(level=_TARGETS.c.level)
    .returning(_B.c.village_id, _B.c.kind, _OLD.c.level)
)  # fmt: skip


async def _take_orders(
    session: AsyncSession, many: Any, one: Any, events: Sequence[Event]
) -> list[tuple[Event, Sequence[Any]]]:
    """The events whose order was still there, each with its order's row (without the id),
    in run order; the orders deleted. An order gone is a village deleted with its orders."""
    ids = [int(event.payload["order_id"]) for event in events]
    if driver.dialect_name(session) == "postgresql":
        found = await rows(session, many, {"order_ids": ids})
    else:
        found = [
            (order_id, *row)
            for order_id in ids
            for row in await rows(session, one, {"order_id": order_id})
        ]
    by_id = {row[0]: row[1:] for row in found}
    done = []
    for event, order_id in zip(events, ids, strict=True):
        row = by_id.pop(order_id, None)  # an order ends once, with the first of its events
        if row is not None:
            done.append((event, row))
    return done


async def _swap_levels(
    session: AsyncSession, levels: Mapping[tuple[int, str], int]
) -> dict[tuple[int, str], int]:
    """Set each (village, building kind) to its level; the levels they had (0 for none)."""
    if driver.dialect_name(session) == "postgresql":
        keys = list(levels)
        found = await rows(
            session,
            _SWAP_LEVELS,
            {
                "swap_villages": [village for village, _ in keys],
                "swap_kinds": [kind for _, kind in keys],
                "swap_levels": [levels[key] for key in keys],
            },
        )
        return {(village, kind): level or 0 for village, kind, level in found}
    # SQLite's RETURNING cannot name the joined row: a read, then the write
    old = {}
    for (village, kind), level in levels.items():
        params = {"b_village": village, "b_kind": kind, "new_level": level}
        found = await rows(session, _LEVEL, params)
        await rows(session, _SET_LEVEL, params)
        old[village, kind] = (found[0][0] if found else 0) or 0
    return old


async def build_done(tx: Tx, events: list[Event]) -> None:
    """Buildings reach their levels, in run order: a field's production or a storage cap
    changes at the event's time. A building finished twice in one batch is set once to its
    last level; each event still changes production by its own step, at its own time."""
    done = await _take_orders(tx.session, _TAKE_BUILDS, _TAKE_BUILD, events)
    if not done:  # every order gone with its village: nothing to set
        return
    finals = {(event.village_id, kind): target for event, (kind, target, _) in done}
    level = await _swap_levels(tx.session, finals)  # then each event's, as it applies
    changes = []
    for event, (kind, target, _) in done:
        before = level.get((event.village_id, kind), 0)
        level[event.village_id, kind] = target
        deltas = {}
        if kind in RESOURCE_OF_FIELD:
            deltas[RESOURCE_OF_FIELD[kind]] = field_production(
                target, tx.world_speed
            ) - field_production(before, tx.world_speed)
        # a storage building is named as the cap it sets (``refgame.resources``)
        caps = {kind: storage_capacity(target)} if kind in STOCKS.caps else None
        if deltas or caps:
            changes.append(RateChange(event.village_id, event.due_ms, deltas, caps))
    await state.change_rates_many(tx.session, changes, tx)
    tx.touch_players(sorted({owner for _, (_, _, owner) in done}))


async def train_done(tx: Tx, events: list[Event]) -> None:
    """Units join their villages, in run order; each village's upkeep rises at the event's
    time."""
    done = await _take_orders(tx.session, _TAKE_TRAININGS, _TAKE_TRAINING, events)
    if not done:
        return
    joined: dict[tuple[int, str], int] = {}  # one row per key: an upsert changes a row once
    for event, (unit, count, _) in done:
        joined[event.village_id, unit] = joined.get((event.village_id, unit), 0) + count
    await state.add_troop_counts(
        tx.session,
        [
            {"village_id": village, "home_village_id": village, "unit": unit, "count": n}
            for (village, unit), n in sorted(joined.items())
            if n > 0
        ],
    )
    changes = [
        RateChange(event.village_id, event.due_ms, {"crop": -total_upkeep({unit: count})})
        for event, (unit, count, _) in done
    ]
    await state.change_rates_many(tx.session, changes, tx)
    tx.touch_players(sorted({owner for _, (_, _, owner) in done}))


async def troops_lost(
    tx: state.GameTx, village_id: int, due_ms: int, payload: Mapping[str, Any]
) -> None:
    lost = {str(u): int(n) for u, n in payload["lost"].items()}
    if await state.village_info(tx.session, village_id) is None:
        return
    await state.change_rates(tx.session, village_id, due_ms, tx, {"crop": total_upkeep(lost)})


async def starvation(
    tx: state.GameTx, village_id: int, due_ms: int, payload: Mapping[str, Any]
) -> None:
    info = await state.village_info(tx.session, village_id)
    if info is None:
        return
    row = await state.stock_row(tx.session, village_id)
    crop = stock_at(row, due_ms)["crop"]
    if row["crop_rate"] >= 0:
        return  # production recovered since this check was scheduled
    if crop > 0:  # upkeep changed since: check again when the granary really runs dry
        when = starvation_time_ms(crop, row["crop_rate"], due_ms)
        if when is not None:
            tx.schedule(STARVATION, village_id, when, {})
        return
    deaths = starve(await state.troops_home(tx.session, village_id), -row["crop_rate"])
    if not deaths:
        return  # nothing at home eats; the deficit stays and crop stays at 0
    await state.remove_losses(tx.session, village_id, {village_id: deaths})
    await state.change_rates(tx.session, village_id, due_ms, tx, {"crop": total_upkeep(deaths)})
    await state.add_report(
        tx.session,
        info.player_id,
        "starvation",
        "Troops starved",
        {"type": "starvation", "time_ms": due_ms, "village": _side(info), "deaths": deaths},
        due_ms,
    )
    tx.touch_players([info.player_id])


async def march(tx: state.GameTx, village_id: int, due_ms: int, payload: Mapping[str, Any]) -> None:
    """One march arrival (a batch of one)."""
    await march_batch(tx, [(village_id, due_ms, payload)])


Arrival = tuple[int, int, Mapping[str, Any]]  # (village_id, due_ms, payload) of a march event


async def march_batch(tx: state.GameTx, arrivals: Sequence[Arrival]) -> None:
    """March arrivals in run order, on the batch's villages held in memory (``BatchState``):
    a few statements for the whole batch instead of ~15 per arrival."""
    io = await batch_io(tx.session)
    found = await io.marches(sorted({int(payload["march_id"]) for _, _, payload in arrivals}))
    marches = {row.id: row for row in found}
    batch = BatchState(io, tx)
    ends = [v for row in found for v in (row.origin_village_id, row.target_village_id)]
    await batch.load((_arrival_village(row) for row in found), info_for=ends)
    for _, due_ms, payload in arrivals:
        row = marches.pop(int(payload["march_id"]), None)
        if row is not None:  # else recalled or already handled
            _arrive(tx, batch, row, due_ms)
    await batch.flush()


def _arrival_village(row: MarchRow) -> int:
    return row.origin_village_id if row.kind == "return" else row.target_village_id


def _arrive(tx: state.GameTx, batch: BatchState, row: MarchRow, at_ms: int) -> None:
    troops = {str(u): int(n) for u, n in row.troops.items() if int(n) > 0}
    origin = batch.villages.get(row.origin_village_id)
    target = batch.villages.get(row.target_village_id)
    if row.kind == "return":
        _arrive_home(tx, batch, row, troops, origin, at_ms)
    elif not troops:
        batch.delete_march(row.id)  # starved on the way
    elif target is None or origin is None:
        _turn_around(tx, batch, row, troops, at_ms)
    elif row.kind == "reinforce":
        _reinforce(tx, batch, row, troops, origin, target, at_ms)
    else:
        _battle(tx, batch, row, troops, origin, target, at_ms)


def _arrive_home(
    tx: state.GameTx,
    batch: BatchState,
    row: MarchRow,
    troops: dict[str, int],
    home: state.VillageInfo | None,
    at_ms: int,
) -> None:
    batch.delete_march(row.id)
    if home is None:
        return  # the home village is gone: its troops scatter
    batch.add_troops(home.id, home.id, troops)
    loot = {r: to_fixed(int(n)) for r, n in (row.loot or {}).items() if int(n) > 0}
    if loot:
        batch.deposit(home.id, loot, at_ms)
    tx.touch_players([home.player_id])


def _send_back(
    tx: state.GameTx,
    batch: BatchState,
    row: MarchRow,
    survivors: Mapping[str, int],
    depart_ms: int,
    arrive_ms: int,
    loot: Mapping[str, int] | None = None,
) -> None:
    """Turn the march row into the return march home and schedule its arrival."""
    event_id = tx.schedule(MARCH, row.origin_village_id, arrive_ms, {"march_id": row.id})
    batch.turn_march_home(
        row.id,
        {"kind": "return", "troops": dict(survivors), "loot": dict(loot or {}),
         "depart_ms": depart_ms, "arrive_ms": arrive_ms, "event_id": event_id},
    )  # fmt: skip


def _turn_around(
    tx: state.GameTx, batch: BatchState, row: MarchRow, troops: dict[str, int], at_ms: int
) -> None:
    """The target is gone: the troops walk back the way they came."""
    _send_back(tx, batch, row, troops, at_ms, at_ms + (at_ms - row.depart_ms))


def _reinforce(
    tx: state.GameTx,
    batch: BatchState,
    row: MarchRow,
    troops: dict[str, int],
    origin: state.VillageInfo,
    target: state.VillageInfo,
    at_ms: int,
) -> None:
    batch.delete_march(row.id)
    batch.add_troops(target.id, origin.id, troops)
    body = reinforcement_report(troops, sender=_side(origin), receiver=_side(target), time_ms=at_ms)
    for player in {origin.player_id, target.player_id}:
        batch.add_report(player, "reinforcement", body["title"], body, at_ms)
    tx.touch_players([origin.player_id, target.player_id])


def _battle(
    tx: state.GameTx,
    batch: BatchState,
    row: MarchRow,
    troops: dict[str, int],
    origin: state.VillageInfo,
    target: state.VillageInfo,
    at_ms: int,
) -> None:
    defenders_by_home = batch.troops_in(target.id)
    defenders: dict[str, int] = {}
    for group in defenders_by_home.values():
        for unit, count in group.items():
            defenders[unit] = defenders.get(unit, 0) + count
    wall = batch.walls.get(target.id, 0)
    result = resolve_battle(troops, defenders, wall, row.kind, new_seed())
    loot = battle_loot(result, visible_stock(batch.stock_at(target.id, at_ms)))

    # The defender's side: losses where they stand, loot out of the stock at the arrival time.
    losses_by_home = split_losses(defenders_by_home, result.defender_losses)
    batch.remove_losses(target.id, losses_by_home)
    if any(loot.values()) and not batch.spend(
        target.id, {r: to_fixed(n) for r, n in loot.items()}, at_ms
    ):
        raise RuntimeError(f"loot {loot} exceeds the stock of village {target.id}")
    own_losses = losses_by_home.pop(target.id, {})
    if own_losses:
        batch.change_rates(target.id, at_ms, {"crop": total_upkeep(own_losses)})
    for home, lost in losses_by_home.items():
        _send_news(tx, home, (target.x, target.y), batch.villages.get(home), lost, at_ms)

    # The attacker's side: the news of losses travels home, survivors follow with the loot.
    lost = {u: n for u, n in result.attacker_losses.items() if n > 0}
    _send_news(tx, origin.id, (target.x, target.y), origin, lost, at_ms)
    back = return_march(
        (origin.x, origin.y),
        (target.x, target.y),
        result.attacker_survivors,
        at_ms,
        tx.world_speed,
        loot,
    )
    if back is None:
        batch.delete_march(row.id)
    else:
        _send_back(tx, batch, row, back.troops, back.depart_ms, back.arrive_ms, back.loot)

    attacker_body, defender_body = battle_reports(
        result, loot=loot, attacker=_side(origin), defender=_side(target), time_ms=at_ms
    )
    batch.add_report(origin.player_id, "battle", attacker_body["title"], attacker_body, at_ms)
    batch.add_report(target.player_id, "battle", defender_body["title"], defender_body, at_ms)
    for player, attack, defence in award(battle_points(result), origin.player_id, target.player_id):
        batch.add_points(player, attack, defence)
    owners = [batch.villages[h].player_id for h in losses_by_home if h in batch.villages]
    tx.touch_players([origin.player_id, target.player_id, *owners])


def _send_news(
    tx: state.GameTx,
    home_id: int,
    battle_xy: tuple[int, int],
    home: state.VillageInfo | None,
    lost: Mapping[str, int],
    at_ms: int,
) -> None:
    """Schedule the upkeep drop at ``home`` when the news of ``lost`` troops reaches it."""
    if home is None or not any(lost.values()):
        return
    travel = march_duration_ms(battle_xy, (home.x, home.y), lost, tx.world_speed)
    tx.schedule(TROOPS_LOST, home_id, at_ms + travel, {"lost": dict(lost)})


# --- compensations: an operator dropped a dead event; give back what its command took ---------
# (``common.queue.deadletters.drop``, in the transaction that deletes the event)


async def _refund(tx: Tx, village_id: int, cost: Mapping[str, int]) -> None:
    """Give ``cost`` (whole units) back to the village, settled like a command's spend."""
    info = await state.village_info(tx.session, village_id)
    if info is None:
        return
    at = await STOCKS.settle_horizon(tx.session, tx.now_ms)
    await STOCKS.deposit(tx.session, village_id, {r: to_fixed(n) for r, n in cost.items()}, at)
    tx.touch_players([info.player_id])


async def drop_build(
    tx: Tx, village_id: int, due_ms: int, payload: Mapping[str, Any], event_id: int
) -> None:
    """The upgrade never happens: its order goes and its cost is refunded."""
    order = await tx.session.get(BuildOrder, int(payload.get("order_id", 0)))
    if order is None:
        return
    await tx.session.execute(delete(BuildOrder).where(BuildOrder.id == order.id))
    await _refund(tx, village_id, build_cost(order.kind, order.target_level).as_dict())


async def drop_training(
    tx: Tx, village_id: int, due_ms: int, payload: Mapping[str, Any], event_id: int
) -> None:
    """The units are never trained: the order goes and its cost is refunded."""
    order = await tx.session.get(TrainingOrder, int(payload.get("order_id", 0)))
    if order is None:
        return
    await tx.session.execute(delete(TrainingOrder).where(TrainingOrder.id == order.id))
    await _refund(tx, village_id, train_cost(order.unit, order.count).as_dict())


async def drop_march(
    tx: Tx, village_id: int, due_ms: int, payload: Mapping[str, Any], event_id: int
) -> None:
    """The march never arrives: its troops (and loot) are home at once. The home village fed
    them while away, so its upkeep does not change."""
    row = await tx.session.get(March, int(payload.get("march_id", 0)))
    if row is None or row.event_id != event_id:  # recalled since: another event carries it
        return
    await tx.session.execute(delete(March).where(March.id == row.id))
    home = await state.village_info(tx.session, row.origin_village_id)
    if home is None:
        return  # the home village is gone: its troops scatter
    troops = {str(u): int(n) for u, n in row.troops.items() if int(n) > 0}
    await state.add_troops(tx.session, home.id, home.id, troops)
    loot = {r: int(n) for r, n in (row.loot or {}).items() if int(n) > 0}
    if loot:
        await _refund(tx, home.id, loot)
    tx.touch_players([home.player_id])


async def drop_news(
    tx: Tx, village_id: int, due_ms: int, payload: Mapping[str, Any], event_id: int
) -> None:
    """The news of troops lost never runs: their upkeep stops now instead (the troops are
    dead either way; the village fed them until the drop)."""
    lost = {str(u): int(n) for u, n in (payload.get("lost") or {}).items() if int(n) > 0}
    info = await state.village_info(tx.session, village_id)
    if not lost or info is None:
        return
    at = await STOCKS.settle_horizon(tx.session, tx.now_ms)
    await state.change_rates(tx.session, village_id, at, tx, {"crop": total_upkeep(lost)})
    tx.touch_players([info.player_id])


# (tx, place id, due ms, payload, event id)
Compensate = Callable[[Tx, int, int, Mapping[str, Any], int], Awaitable[None]]
# (a dropped starvation check needs none: the next change of the village's rates checks again)
COMPENSATIONS: dict[str, Compensate] = {
    BUILD_DONE: drop_build,
    TRAIN_DONE: drop_training,
    MARCH: drop_march,
    TROOPS_LOST: drop_news,
}

Apply = Callable[[state.GameTx, int, int, Mapping[str, Any]], Awaitable[None]]
MAX_BATCH = 100  # events per call of a handler that runs them one by one
MAX_SET_BATCH = 500  # events per call of a set-based handler (one BatchState for marches)
# the rare kinds, run one by one inside a call (~6 statements each)
HANDLERS: dict[str, Apply] = {
    TROOPS_LOST: troops_lost,
    STARVATION: starvation,
}


async def _marches(tx: Tx, events: list[Event]) -> None:
    await march_batch(tx, [(e.village_id, e.due_ms, e.payload) for e in events])


# most of a world's events: a few statements per call, whatever its size
SET_HANDLERS: dict[str, Handler] = {
    BUILD_DONE: build_done,
    TRAIN_DONE: train_done,
    MARCH: _marches,
}


def _batch_handler(apply: Apply) -> Handler:
    async def handle(tx: Tx, events: list[Event]) -> None:
        for event in events:  # in run order: (due, priority, id)
            await apply(tx, event.village_id, event.due_ms, event.payload)

    return handle


def _compensation_of(kind: str) -> Handler | None:
    drop = COMPENSATIONS.get(kind)
    return None if drop is None else _compensation(drop)


def _compensation(compensate: Compensate) -> Handler:
    async def handle(tx: Tx, events: list[Event]) -> None:
        for event in events:
            await compensate(tx, event.village_id, event.due_ms, event.payload, event.id)

    return handle


REPORTS_RETENTION_JOB = "refgame.reports-retention"
DEFAULT_RETENTION_EVERY_S = 300


async def prune_reports(ctx: JobContext) -> None:
    """Delete reports older than ``RETENTION_REPORTS_S`` (oldest ids first, in batches)."""
    keep_s = ctx.settings.retention_reports_s
    if not keep_s:
        return
    older = Report.created_ms < ctx.clock.now_ms() - keep_s * 1000
    table = cast(Table, Report.__table__)
    await prune_rows(
        ctx.sessions, table, older, batch=ctx.settings.retention_batch, order_by=Report.id
    )


def register(registry: HandlerRegistry, settings: Settings | None = None) -> None:
    """Register the reference game's event handlers and jobs on a task server."""
    world_speed = settings.world_speed if settings else 1.0
    every_s = settings.retention_every_s if settings else DEFAULT_RETENTION_EVERY_S
    registry.add_job(REPORTS_RETENTION_JOB, prune_reports, every_s)
    registry.add_job(rankings.RANKINGS_JOB, rankings.rankings_job, rankings.RANKINGS_EVERY_S)
    # the news of a battle reaches a neighbour's village no sooner than this
    registry.set_lookahead(shortest_follow_up_ms(world_speed))
    for kind, handler in SET_HANDLERS.items():
        registry.register(kind, handler, max_batch=MAX_SET_BATCH, compensate=_compensation_of(kind))
    for kind, apply in HANDLERS.items():
        # run one by one inside a call: keep a call well inside the handler timeout, or a
        # big batch would time out and be re-run
        registry.register(
            kind, _batch_handler(apply), max_batch=MAX_BATCH, compensate=_compensation_of(kind)
        )
