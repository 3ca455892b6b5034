"""The reference game's player commands: build, train, send a march, recall.

Each runs inside one transaction the caller opens (the web tier) and returns
a JSON-ready dict. Spending is one conditional UPDATE (``Stocks.spend``,
``state.take_troops``), so concurrent commands can never spend the same
resources or troops twice; on any refusal a ``RuleError`` is raised and the
caller rolls back, so nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NoReturn, Protocol

from pydantic import Field
from sqlalchemy import (
    BigInteger,
    CompoundSelect,
    Integer,
    bindparam,
    insert,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from common.amounts import to_fixed, to_units
from db import events as pending
from db.models import Village
from gameapi import Rows, StaleRead
from gameapi.routes import CommandRoute
from refgame import state
from refgame.buildings import BuildOrderInfo, plan_build
from refgame.errors import (
    EventsPending,
    InsufficientResources,
    InsufficientTroops,
    InvalidMarch,
    NotRecallable,
    NotYourVillage,
    RuleError,
)
from refgame.handlers import BUILD_DONE, MARCH, TRAIN_DONE
from refgame.models import Building, BuildOrder, March, TrainingOrder, Troop
from refgame.resources import STOCKS, Cost, check_affordable, stock_units_at
from refgame.travel import check_recall, plan_march, recall_return_ms
from refgame.units import MAX_TRAIN_PER_ORDER, MAX_TROOPS_PER_UNIT, UNITS, plan_training
from webfront.validation import Id, Out, StrictBody


class CommandTx(state.GameTx, Protocol):
    """A command's transaction: the game tx plus the clock and a durable-event cancel."""

    now_ms: int

    async def cancel(self, event_id: int) -> bool: ...

    async def connection(self) -> AsyncConnection: ...

    @property
    def dialect(self) -> str: ...

    async def rows(self, statement: Any, params: Mapping[str, Any] | None = None) -> Rows: ...

    async def read(self, statement: Any, params: Mapping[str, Any] | None = None) -> Rows: ...

    def alert(self, player_id: int, kind: str, data: dict[str, Any] | None = None) -> None: ...

    def write_at_commit(self, insert: Any, values: Mapping[str, Any]) -> None: ...

    def require_at_commit(self, statement: Any, params: Mapping[str, Any]) -> None: ...


async def own_village(tx: CommandTx, player_id: int, village_id: int) -> state.VillageInfo:
    village = await state.village_info(tx.session, village_id)
    if village is None or village.player_id != player_id:
        raise NotYourVillage(f"you have no village {village_id}")
    return village


async def require_settled(tx: CommandTx, village_id: int) -> None:
    """Refuse to settle a village at *now* while one of its events is overdue (a dead one
    aside: it waits for an operator, the village does not)."""
    if await pending.village_has_overdue(tx.session, village_id, tx.now_ms):
        raise EventsPending("this village has events finishing right now; retry in a moment")


@dataclass
class _Seen:
    """What a command's one read saw of its village (``_reads``)."""

    owner: int | None = None
    buildings: dict[str, int] = field(default_factory=dict)
    queued: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, n, done_ms)
    stock: dict[str, int] = field(default_factory=dict)  # fixed-point, at ``at_ms``
    at_ms: int = 0
    overdue: bool = False
    dialect: str = ""  # of the read's connection


async def pay(tx: CommandTx, village_id: int, cost: dict[str, int]) -> int:
    """Spend ``cost`` now; returns the time the stock was settled at.

    That is *now*, unless an event elsewhere is overdue: its follow-ups (news of a
    battle, a return with loot) may land in this village at any time from its due time
    on, so the stock is settled no later than that (``Stocks.settle_horizon``).
    """
    await require_settled(tx, village_id)
    at = await STOCKS.settle_horizon(tx.session, tx.now_ms)
    spent = await STOCKS.spend(
        await tx.connection(), village_id, {r: to_fixed(n) for r, n in cost.items()}, at
    )
    if spent is None:
        # tell what is missing, per resource (the same settled stock the spend compared)
        check_affordable(Cost.of(cost), await stock_units_at(tx.session, village_id, at))
        _short_by_a_fraction(cost)
    return spent


def _short_by_a_fraction(cost: dict[str, int]) -> NoReturn:
    raise InsufficientResources(  # covered in whole units, short by a fraction of one
        "not enough resources; wait for production or lower the quantity", cost=cost
    )


def pay_at_commit(tx: CommandTx, village_id: int, cost: Cost, seen: _Seen) -> int:
    """Spend ``cost`` from the stock the command's one read saw (build, train); returns the
    time it is settled at. The overdue check and the cost are judged on that read, so a
    refusal writes nothing; the spend itself goes in the closing statement, and only if
    the stock is as read (``Stocks.spend_at``): else the command runs again
    (``StaleRead``) and judges the stock as it is then."""
    if seen.overdue:  # require_settled, read with the rest
        raise EventsPending("this village has events finishing right now; retry in a moment")
    check_affordable(cost, {r: to_units(n) for r, n in seen.stock.items()})
    amounts = cost.as_dict()
    fixed = {r: to_fixed(n) for r, n in amounts.items()}
    if any(seen.stock.get(r, 0) < n for r, n in fixed.items()):
        _short_by_a_fraction(amounts)
    tx.require_at_commit(*STOCKS.spend_at(village_id, fixed, seen.at_ms, seen.dialect))
    return seen.at_ms


# built once (a Core insert with parameters): every build and train writes one
_ORDER_INSERTS = {
    order: insert(order.__table__)  # type: ignore[arg-type]
    for order in (BuildOrder, TrainingOrder)
}


async def _place_order(
    tx: CommandTx,
    player_id: int,
    village_id: int,
    cost: Cost,
    seen: _Seen,
    order: type[BuildOrder] | type[TrainingOrder],
    done_event: str,
    **columns: Any,
) -> tuple[int, int]:
    """Pay ``cost``, insert the queue order row and schedule its completion event at
    ``columns["done_ms"]``; returns (order id, the time the stock was settled at)."""
    spent_ms = pay_at_commit(tx, village_id, cost, seen)
    # written with the spend and the event in the closing statement
    order_id = tx.ids.next_id()
    tx.write_at_commit(_ORDER_INSERTS[order], {"id": order_id, "village_id": village_id, **columns})
    tx.schedule(done_event, village_id, columns["done_ms"], {"order_id": order_id})
    tx.touch_players([player_id])
    return order_id, spent_ms


# constants written into the statement, not bound anew at every run
_ZERO = literal_column("0", BigInteger)


def _reads(queue: type[BuildOrder] | type[TrainingOrder], dialect: str) -> CompoundSelect:
    """The owner, the buildings and the ``queue`` of ``:village_id``, whether it has an
    overdue event, and its stock at the settle horizon, in one read (rows tagged v, b, o,
    x, s); built once per queue and dialect, as building a statement costs more than
    running it.

    One statement is one consistent view: two reads could straddle a ``build_done`` that
    commits between them (the level before it, the queue after it) and plan one level
    twice (a chaos run under load found it: a level short of its completed builds)."""
    vid = bindparam("village_id", type_=BigInteger)
    now = bindparam("now_ms", type_=BigInteger)
    # table columns only: a Core statement skips the ORM's per-call work
    v, b, q = Village.__table__.c, Building.__table__.c, queue.__table__.c
    kind, n = (q.kind, q.target_level) if queue is BuildOrder else (q.unit, q.count)
    return union_all(
        select(pending.written("v").label("tag"), pending.written("").label("kind"),
               v.player_id.label("n"), _ZERO.label("done_ms"))
        .where(v.id == vid),
        select(pending.written("b"), b.kind, b.level, _ZERO).where(b.village_id == vid),
        select(pending.written("o"), kind, n, q.done_ms).where(q.village_id == vid),
        pending.overdue_row("x", vid, now),
        *STOCKS.settled_rows("s", vid, now, dialect),
    )  # fmt: skip


_READS: dict[tuple[str, str], CompoundSelect] = {}


async def _read(
    tx: CommandTx, player_id: int, village_id: int, queue: type[BuildOrder] | type[TrainingOrder]
) -> _Seen:
    dialect = tx.dialect
    stmt = _READS.get((queue.__name__, dialect))
    if stmt is None:
        stmt = _READS[(queue.__name__, dialect)] = _reads(queue, dialect)
    seen = _Seen(dialect=dialect)
    params = {"village_id": village_id, "now_ms": tx.now_ms}
    for tag, name, n, done_ms in await tx.read(stmt, params):
        if tag == "v":
            seen.owner = int(n)
        elif tag == "b":
            seen.buildings[name] = int(n)
        elif tag == "o":
            seen.queued.append((name, int(n), int(done_ms)))
        elif tag == "s":
            seen.stock[name], seen.at_ms = int(n), int(done_ms)
        else:
            seen.overdue = True
    if seen.owner != player_id:
        raise NotYourVillage(f"you have no village {village_id}")
    seen.queued.sort(key=lambda o: o[2])
    return seen


async def build(tx: CommandTx, player_id: int, village_id: int, kind: str) -> dict[str, Any]:
    seen = await _read(tx, player_id, village_id, BuildOrder)
    queued = [BuildOrderInfo(name, n, done_ms) for name, n, done_ms in seen.queued]
    plan = plan_build(kind, seen.buildings, queued, tx.now_ms, tx.world_speed)
    order_id, spent_ms = await _place_order(
        tx, player_id, village_id, plan.cost, seen, BuildOrder, BUILD_DONE,
        kind=plan.kind, target_level=plan.target_level,
        started_ms=plan.start_ms, done_ms=plan.done_ms,
    )  # fmt: skip
    return {
        "order_id": str(order_id),
        "kind": plan.kind,
        "target_level": plan.target_level,
        "cost": plan.cost.as_dict(),
        "spent_ms": spent_ms,
        "started_ms": plan.start_ms,
        "done_ms": plan.done_ms,
    }


async def train(
    tx: CommandTx, player_id: int, village_id: int, unit: str, count: int
) -> dict[str, Any]:
    seen = await _read(tx, player_id, village_id, TrainingOrder)
    spec = UNITS.get(unit)  # an unknown unit is refused by plan_training
    building = spec.trained_in if spec else "barracks"
    barracks = seen.buildings.get(building, 0)
    queued = [done_ms for _, _, done_ms in seen.queued]
    plan = plan_training(unit, count, barracks, queued, tx.now_ms, tx.world_speed)
    order_id, spent_ms = await _place_order(
        tx, player_id, village_id, plan.cost, seen, TrainingOrder, TRAIN_DONE,
        unit=plan.unit, count=plan.count, started_ms=plan.start_ms, done_ms=plan.done_ms,
    )  # fmt: skip
    return {
        "order_id": str(order_id),
        "unit": plan.unit,
        "count": plan.count,
        "cost": plan.cost.as_dict(),
        "spent_ms": spent_ms,
        "started_ms": plan.start_ms,
        "done_ms": plan.done_ms,
    }


_NEW_MARCH = insert(March).returning(March.id)  # the columns its values name


def _march_reads() -> CompoundSelect:
    """The owner and place of ``:village_id``, the village at (``:x``, ``:y``), the rally
    point and the troops at home, in one read (rows tagged o, v, t, r, h): one consistent
    view, and a march the rules refuse costs this one round trip."""
    vid = bindparam("village_id", type_=BigInteger)
    v, t = Village.__table__.c, Village.__table__.alias("target").c
    b, h = Building.__table__.c, Troop.__table__.c
    w = pending.written
    return union_all(
        select(w("o"), w(""), v.player_id, _ZERO).where(v.id == vid),
        select(w("v"), w(""), v.x, v.y).where(v.id == vid),
        select(w("t"), w(""), t.id, t.player_id).where(
            t.x == bindparam("x", type_=Integer), t.y == bindparam("y", type_=Integer)
        ),
        select(w("r"), w(""), b.level, _ZERO).where(
            b.village_id == vid, b.kind == w("rally_point")
        ),
        select(w("h"), h.unit, h.count, _ZERO).where(
            h.village_id == vid, h.home_village_id == vid, h.count > 0
        ),
    )  # fmt: skip


_MARCH_READS = _march_reads()


@dataclass
class _MarchSeen:
    """What a march's one read saw (``_march_reads``)."""

    owner: int | None = None
    place: tuple[int, int] | None = None  # the origin's (x, y)
    target: tuple[int, int | None] | None = None  # (id, owner) of the village at (x, y)
    rally: int = 0
    home: dict[str, int] = field(default_factory=dict)


async def send_march(
    tx: CommandTx,
    player_id: int,
    village_id: int,
    kind: str,
    x: int,
    y: int,
    troops: dict[str, int],
) -> dict[str, Any]:
    seen = _MarchSeen()
    params = {"village_id": village_id, "x": x, "y": y}
    for tag, name, a, b in await tx.read(_MARCH_READS, params):
        if tag == "o":
            seen.owner = None if a is None else int(a)
        elif tag == "v":
            seen.place = (int(a), int(b))
        elif tag == "t":
            seen.target = (int(a), None if b is None else int(b))
        elif tag == "r":
            seen.rally = int(a)
        else:
            seen.home[name] = int(a)
    if seen.place is None or seen.owner != player_id:
        raise NotYourVillage(f"you have no village {village_id}")
    if seen.target is None:
        raise InvalidMarch(f"there is no village at ({x}, {y})")
    target_id, target_owner = seen.target
    if kind in ("attack", "raid") and target_owner == player_id:
        raise InvalidMarch("you cannot attack your own village")
    plan = plan_march(kind, troops, seen.place, (x, y), seen.rally, tx.now_ms, tx.world_speed)
    available = {u: seen.home.get(u, 0) for u in plan.troops}
    if any(available[u] < n for u, n in plan.troops.items()):
        short = ", ".join(f"{n} {u}" for u, n in available.items() if n < plan.troops[u])
        raise InsufficientTroops(
            f"not enough troops at home: only {short}",
            wanted=dict(plan.troops),
            available=available,
        )
    if not await state.take_troops(tx.session, village_id, village_id, plan.troops):
        # they left or fell since the read (a battle's losses): judge the march again
        raise StaleRead("the troops at home changed since the march read them")
    # the march row names its event, and the event its march: the event's id comes first
    event_id = tx.ids.next_id()
    march = {
        "kind": plan.kind,
        "origin_village_id": village_id,
        "target_village_id": target_id,
        "troops": dict(plan.troops),
        "loot": {},
        "depart_ms": plan.depart_ms,
        "arrive_ms": plan.arrive_ms,
        "event_id": event_id,
    }
    ((march_id,),) = await tx.rows(_NEW_MARCH, march)
    tx.schedule(MARCH, target_id, plan.arrive_ms, {"march_id": march_id}, event_id=event_id)
    tx.touch_players([player_id, target_owner])
    if plan.kind in ("attack", "raid") and target_owner is not None:
        ox, oy = seen.place
        tx.alert(target_owner, "incoming_attack", {
            "march_id": march_id, "kind": plan.kind, "target_village_id": target_id,
            "origin": {"x": ox, "y": oy}, "arrive_ms": plan.arrive_ms,
        })  # fmt: skip
    return {
        "march_id": march_id,
        "kind": plan.kind,
        "target_village_id": target_id,
        "troops": dict(plan.troops),
        "depart_ms": plan.depart_ms,
        "arrive_ms": plan.arrive_ms,
    }


async def recall(tx: CommandTx, player_id: int, march_id: int) -> dict[str, Any]:
    row = await tx.session.get(March, march_id)
    origin = await state.village_info(tx.session, row.origin_village_id) if row else None
    if row is None or origin is None or origin.player_id != player_id:
        raise NotYourVillage(f"you have no march {march_id}")
    check_recall(row.kind, row.depart_ms, row.arrive_ms, tx.now_ms)
    # The DB decides the race with the arrival: exactly one of them deletes the event row.
    if not await tx.cancel(row.event_id):
        raise NotRecallable("the march has already arrived", march_id=row.id)
    arrive = recall_return_ms(row.depart_ms, tx.now_ms)
    event_id = tx.schedule(MARCH, origin.id, arrive, {"march_id": row.id})
    await tx.session.execute(
        update(March)
        .where(March.id == row.id)
        .values(kind="return", depart_ms=tx.now_ms, arrive_ms=arrive, event_id=event_id)
    )
    target = await state.village_info(tx.session, row.target_village_id)
    tx.touch_players([player_id, target.player_id if target else None])
    return {"march_id": row.id, "kind": "return", "arrive_ms": arrive}


# --- HTTP routes: mounted by the web tier under /api/<path> -------------------------------------

Name = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z_]+$")]
Count = Annotated[int, Field(ge=1, le=MAX_TRAIN_PER_ORDER)]
Coordinate = Annotated[int, Field(ge=-10_000, le=10_000)]


class BuildBody(StrictBody):
    village_id: Id
    kind: Name = Field(description="a building kind, e.g. woodcutter, warehouse, barracks")


class TrainBody(StrictBody):
    village_id: Id
    unit: Name = Field(description="a unit, e.g. legionnaire")
    count: Count


class MarchBody(StrictBody):
    village_id: Id = Field(description="the village the troops leave from")
    kind: Literal["attack", "raid", "reinforce"]
    x: Coordinate
    y: Coordinate
    troops: dict[Name, Annotated[int, Field(ge=0, le=MAX_TROOPS_PER_UNIT)]] = Field(
        min_length=1, max_length=len(UNITS)
    )


class RecallBody(StrictBody):
    march_id: Id


class OrderOut(Out):
    order_id: str = Field(description="the order's id, as text: ids pass 2**53")
    kind: str | None = None
    target_level: int | None = None
    unit: str | None = None
    count: int | None = None
    cost: dict[str, int]
    spent_ms: int = Field(
        description="when the resources were taken: now, or the due time of an overdue "
        "event if one is running late"
    )
    started_ms: int
    done_ms: int


class MarchOut(Out):
    march_id: int
    kind: str
    target_village_id: int | None = None
    troops: dict[str, int] | None = None
    depart_ms: int | None = None
    arrive_ms: int


async def _build_route(ctx: CommandTx, player_id: int, body: BuildBody) -> dict[str, Any]:
    return await build(ctx, player_id, body.village_id, body.kind)


async def _train_route(ctx: CommandTx, player_id: int, body: TrainBody) -> dict[str, Any]:
    return await train(ctx, player_id, body.village_id, body.unit, body.count)


async def _march_route(ctx: CommandTx, player_id: int, body: MarchBody) -> dict[str, Any]:
    troops = {u: n for u, n in body.troops.items() if n > 0}
    return await send_march(ctx, player_id, body.village_id, body.kind, body.x, body.y, troops)


async def _recall_route(ctx: CommandTx, player_id: int, body: RecallBody) -> dict[str, Any]:
    return await recall(ctx, player_id, body.march_id)


ROUTES = [
    CommandRoute("build", BuildBody, _build_route, "Queue a building upgrade", OrderOut),
    CommandRoute("train", TrainBody, _train_route, "Queue troop training", OrderOut),
    CommandRoute(
        "march", MarchBody, _march_route, "Send troops: attack, raid, reinforce", MarchOut
    ),
    CommandRoute("recall", RecallBody, _recall_route, "Call a march back home", MarchOut),
]
RULE_ERRORS = (RuleError,)
