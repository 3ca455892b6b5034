"""Places (villages, planets): the framework's rows a game's rules refer to."""

from __future__ import annotations

from sqlalchemy import select

from common.queue.tx import Tx
from db.models import Village


class NotYourPlace(Exception):
    """A command names a place that does not exist or is another player's."""

    code = "village_not_found"
    http_status = 404


async def own_place(tx: Tx, place_id: int) -> None:
    """Raise ``NotYourPlace`` (404) unless the place exists and is the commanding player's."""
    found = await tx.session.execute(
        select(Village.id).where(Village.id == place_id, Village.player_id == tx.player_id)
    )
    if found.first() is None:
        raise NotYourPlace("no such village of yours")
