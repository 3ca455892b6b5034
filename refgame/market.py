"""Trade in the database: the ``send_resources`` command and its two events.

- ``send_resources`` (web tier): pays the shipment from the sender's stock (the same
  conditional spend as every command), takes its merchants and schedules
  ``trade_arrive`` in the target village.
- ``trade_arrive`` (``trade_id``): the target takes what fits under its caps at the
  event's due time; the rest is lost; both players get a ``trade`` report; the merchants
  turn home (``trade_return`` at the sender, as long after as the way took).
- ``trade_return`` (``trade_id``): the merchants are home and free again.

Busy merchants are the ``merchants`` of the village's ``trades`` rows. A send first
locks its marketplace row (a no-op UPDATE), so two concurrent sends of one village
count each other's merchants: PostgreSQL makes the second wait for the first's commit,
SQLite runs one writer at a time.

An operator who drops a dead ``trade_arrive`` gives the goods back to the sender (capped
by its storage, like any gain) and frees the merchants; a dropped ``trade_return`` frees
them at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, model_validator
from sqlalchemy import delete, func, insert, select, update

from common.amounts import to_fixed
from common.queue import Event
from common.queue.handlers import Handler, HandlerRegistry
from common.queue.tx import Tx
from common.settings import Settings
from gameapi.routes import CommandRoute
from refgame import state
from refgame.commands import CommandTx, Coordinate, own_village, pay
from refgame.economy import stock_at
from refgame.errors import InvalidTrade
from refgame.handlers import MAX_BATCH, _refund, _side
from refgame.models import Building, Trade
from refgame.resources import RESOURCES
from refgame.trade import (
    MAX_SHIPMENT,
    MERCHANT_SPEED,
    plan_trade,
    split_delivery,
)
from refgame.travel import travel_ms
from webfront.validation import Id, Out, StrictBody

TRADE_ARRIVE = "trade_arrive"
TRADE_RETURN = "trade_return"


async def _lock_marketplace(tx: CommandTx, village_id: int) -> int:
    """The marketplace level, read with its row locked until the commit (see the module)."""
    level = (
        await tx.session.execute(
            update(Building)
            .where(Building.village_id == village_id, Building.kind == "marketplace")
            .values(level=Building.level)
            .returning(Building.level)
            .execution_options(synchronize_session=False)
        )
    ).scalar()
    return int(level or 0)


async def busy_merchants(tx: state.GameTx, village_id: int) -> int:
    busy = await tx.session.scalar(
        select(func.coalesce(func.sum(Trade.merchants), 0)).where(
            Trade.origin_village_id == village_id
        )
    )
    return int(busy or 0)


async def send_resources(
    tx: CommandTx,
    player_id: int,
    village_id: int,
    target: int | tuple[int, int],
    amounts: Mapping[str, int],
) -> dict[str, Any]:
    """Send ``amounts`` (whole units) to ``target`` (a village id or its (x, y))."""
    origin = await own_village(tx, player_id, village_id)
    to = (
        await state.village_info(tx.session, target)
        if isinstance(target, int)
        else await state.village_at(tx.session, *target)
    )
    if to is None:
        where = f"village {target}" if isinstance(target, int) else f"village at {target}"
        raise InvalidTrade(f"there is no {where}")
    if to.id == origin.id:
        raise InvalidTrade("a village cannot send resources to itself")
    level = await _lock_marketplace(tx, village_id)
    plan = plan_trade(
        amounts,
        (origin.x, origin.y),
        (to.x, to.y),
        level,
        await busy_merchants(tx, village_id),
        tx.now_ms,
        tx.world_speed,
    )
    spent_ms = await pay(tx, village_id, dict(plan.resources))
    trade_id = (
        await tx.session.execute(
            insert(Trade)
            .values(
                origin_village_id=origin.id,
                target_village_id=to.id,
                resources=dict(plan.resources),
                delivered={},
                lost={},
                merchants=plan.merchants,
                depart_ms=plan.depart_ms,
                arrive_ms=plan.arrive_ms,
                return_ms=plan.return_ms,
                homebound=False,
                event_id=0,
            )
            .returning(Trade.id)
        )
    ).scalar_one()
    event_id = tx.schedule(TRADE_ARRIVE, to.id, plan.arrive_ms, {"trade_id": trade_id})
    await tx.session.execute(update(Trade).where(Trade.id == trade_id).values(event_id=event_id))
    tx.touch_players([player_id, to.player_id])
    return {
        "trade_id": trade_id,
        "target_village_id": to.id,
        "resources": {r: plan.resources.get(r, 0) for r in RESOURCES},
        "merchants": plan.merchants,
        "spent_ms": spent_ms,
        "depart_ms": plan.depart_ms,
        "arrive_ms": plan.arrive_ms,
        "return_ms": plan.return_ms,
    }


async def trade_arrive(tx: Tx, village_id: int, due_ms: int, payload: Mapping[str, Any]) -> None:
    """Credit what fits at ``due_ms`` (however late this runs), report, turn home."""
    row = await tx.session.get(Trade, int(payload["trade_id"]))
    if row is None or row.homebound:  # the sender's village was deleted, or a dropped event
        return
    sent = {r: int(row.resources.get(r, 0)) for r in RESOURCES}
    target = await state.village_info(tx.session, row.target_village_id)
    space: dict[str, int] = {}
    if target is not None:
        stock_row = await state.stock_row(tx.session, target.id)
        # the village is held at or before this event's due time (tick, commands), so
        # ``updated_ms`` is not past it; ``max`` keeps ``stock_at`` defined if it were
        stock = stock_at(stock_row, max(due_ms, stock_row["updated_ms"]))
        for res in RESOURCES:
            cap = stock_row["granary_cap" if res == "crop" else "warehouse_cap"]
            space[res] = cap - stock[res]
    delivered, lost = split_delivery(sent, space)
    if target is not None:
        await tx.stocks.deposit(
            tx.session, target.id, {r: to_fixed(n) for r, n in delivered.items()}, due_ms
        )
    back_ms = due_ms + (row.arrive_ms - row.depart_ms)
    event_id = tx.schedule(TRADE_RETURN, row.origin_village_id, back_ms, {"trade_id": row.id})
    await tx.session.execute(
        update(Trade)
        .where(Trade.id == row.id)
        .values(homebound=True, delivered=delivered, lost=lost, return_ms=back_ms,
                event_id=event_id)
    )  # fmt: skip
    origin = await state.village_info(tx.session, row.origin_village_id)
    body = {
        "type": "trade",
        "trade_id": row.id,
        "time_ms": due_ms,
        "sender": _side(origin) if origin else {"village_id": row.origin_village_id},
        "receiver": _side(target) if target else {"village_id": row.target_village_id},
        "merchants": row.merchants,
        "sent": sent,
        "delivered": delivered,
        "lost": lost,
    }
    title = "Resources delivered" if not any(lost.values()) else "Resources delivered, some lost"
    players = {v.player_id for v in (origin, target) if v is not None}
    for player in sorted(p for p in players if p is not None):
        await state.add_report(tx.session, player, "trade", title, body, due_ms)
    tx.touch_players(players)


async def trade_return(tx: Tx, village_id: int, due_ms: int, payload: Mapping[str, Any]) -> None:
    """The merchants are home: deleting the row frees them."""
    await tx.session.execute(delete(Trade).where(Trade.id == int(payload["trade_id"])))
    info = await state.village_info(tx.session, village_id)
    tx.touch_players([info.player_id if info else None])


# --- compensations (``common.queue.deadletters.drop``)


async def drop_arrive(tx: Tx, event: Event) -> None:
    """The goods never arrive: they go back to the sender and the merchants are home."""
    row = await tx.session.get(Trade, int(event.payload.get("trade_id", 0)))
    if row is None or row.event_id != event.id:
        return
    await tx.session.execute(delete(Trade).where(Trade.id == row.id))
    await _refund(tx, row.origin_village_id, {r: int(n) for r, n in row.resources.items()})


async def drop_return(tx: Tx, event: Event) -> None:
    """The merchants are home at once."""
    row = await tx.session.get(Trade, int(event.payload.get("trade_id", 0)))
    if row is not None and row.event_id == event.id:
        await trade_return(tx, event.village_id, event.due_ms, event.payload)


def _handler(apply: Any) -> Handler:
    async def handle(tx: Tx, events: list[Event]) -> None:
        for event in events:  # in run order
            await apply(tx, event.village_id, event.due_ms, event.payload)

    return handle


def _compensation(drop: Any) -> Handler:
    async def handle(tx: Tx, events: list[Event]) -> None:
        for event in events:
            await drop(tx, event)

    return handle


def register(registry: HandlerRegistry, settings: Settings | None = None) -> None:
    """Register the trade events; a merchant's one field bounds the lookahead too."""
    world_speed = settings.world_speed if settings else 1.0
    one_field = travel_ms(1, MERCHANT_SPEED, world_speed)
    if registry.lookahead_ms is not None and one_field < registry.lookahead_ms:
        registry.set_lookahead(one_field)
    registry.register(
        TRADE_ARRIVE, _handler(trade_arrive), max_batch=MAX_BATCH,
        compensate=_compensation(drop_arrive),
    )  # fmt: skip
    registry.register(
        TRADE_RETURN, _handler(trade_return), max_batch=MAX_BATCH,
        compensate=_compensation(drop_return),
    )  # fmt: skip


# --- HTTP route: POST /api/send_resources

Amount = Annotated[int, Field(ge=0, le=MAX_SHIPMENT)]


class Shipment(StrictBody):
    wood: Amount = 0
    clay: Amount = 0
    iron: Amount = 0
    crop: Amount = 0


class SendResourcesBody(StrictBody):
    village_id: Id = Field(description="the village the merchants leave from")
    target_village_id: Id | None = Field(None, description="the target village, or give x, y")
    x: Coordinate | None = None
    y: Coordinate | None = None
    resources: Shipment

    @model_validator(mode="after")
    def _one_target(self) -> SendResourcesBody:
        by_xy = self.x is not None or self.y is not None
        if (self.target_village_id is None) == (not by_xy) or (
            by_xy and (self.x is None or self.y is None)
        ):
            raise ValueError("give either target_village_id or both x and y")
        return self


class TradeOut(Out):
    trade_id: int
    target_village_id: int
    resources: dict[str, int]
    merchants: int
    spent_ms: int
    depart_ms: int
    arrive_ms: int
    return_ms: int = Field(description="when the merchants are home again (if on time)")


async def _send_route(ctx: CommandTx, player_id: int, body: SendResourcesBody) -> dict[str, Any]:
    target: int | tuple[int, int]
    if body.target_village_id is not None:
        target = body.target_village_id
    else:
        assert body.x is not None and body.y is not None  # the validator says so
        target = (body.x, body.y)
    amounts = body.resources.model_dump()
    return await send_resources(ctx, player_id, body.village_id, target, amounts)


ROUTES = [
    CommandRoute(
        "send_resources", SendResourcesBody, _send_route,
        "Send resources with merchants to another village", TradeOut,
    ),
]  # fmt: skip
