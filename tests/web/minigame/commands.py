"""One test command, ``POST /api/test/spend``: spend wood of an own village.

It follows the rules a real command must: ownership check, a conditional spend
(``wood >= cost`` in the UPDATE itself, so concurrent requests cannot spend the
same wood twice), a rule error when there is not enough, and an after-commit
hook (here it records that it ran, where a game would enqueue its event).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import select, update

from common.amounts import SCALE
from db.models import Village
from gameapi import CommandRoute, Id, Out, StrictBody, Tx, own_place
from refgame.errors import InsufficientResources, RuleError
from refgame.resources import STOCKS

AFTER_COMMIT_LOG: list[int] = []  # the tests read it


class SpendBody(StrictBody):
    village_id: Id
    wood: Annotated[int, Field(ge=1, le=1_000_000)]
    notify_village_id: Id | None = None  # a village whose owner's snapshot also changes


class SpendOut(Out):
    village_id: int
    wood_left_fixed: int


async def spend(ctx: Tx, player_id: int, body: SpendBody) -> dict[str, Any]:
    await own_place(ctx, body.village_id)
    if body.wood == 666:  # a bug in game code: the API must answer 500 without details
        raise RuntimeError("secret internals of the game")
    cost = body.wood * SCALE
    result = await ctx.session.execute(
        update(STOCKS.table)
        .where(STOCKS.c.village_id == body.village_id, STOCKS.c.wood >= cost)
        .values(wood=STOCKS.c.wood - cost)
        .returning(STOCKS.c.wood)
    )
    left = result.scalar_one_or_none()
    if left is None:
        raise InsufficientResources("not enough wood", needed=body.wood)
    if body.notify_village_id is not None:
        owner = await ctx.session.execute(
            select(Village.player_id).where(Village.id == body.notify_village_id)
        )
        notified = owner.scalar_one_or_none()
        ctx.touch_players([notified])
        if notified is not None:  # pushed to that player's open event streams
            ctx.alert(notified, "test_alert", {"wood": body.wood})

    async def record() -> None:
        AFTER_COMMIT_LOG.append(body.village_id)

    ctx.after_commit(record)
    if body.wood == 13:  # an event, like a real command's: indexed in the queue after commit
        ctx.schedule("test.noop", body.village_id, ctx.now_ms + 60_000, {"wood": 13})
    return {"village_id": body.village_id, "wood_left_fixed": left}


ROUTES = [
    CommandRoute(
        "test/spend",
        SpendBody,
        spend,
        summary="Spend wood (a test command)",
        response_model=SpendOut,
    )
]
RULE_ERRORS = (RuleError,)
