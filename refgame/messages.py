"""Players' messages: send to a player by name or to one's whole alliance, read, mark read.

A message is stored once per recipient (fan-out): an alliance message writes one row per
member (at most ``alliances.MAX_MEMBERS``), the sender's own copy already read. Each
copy has its own read mark, so the inbox, its unread count (``unread_messages`` in the
snapshot) and its pages are plain reads of one player's rows by ``(recipient_id, id)``.
Bodies are plain text: the client shows them as text, never as HTML.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, Field
from sqlalchemy import false, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Player
from gameapi.routes import CommandRoute, QueryRoute
from refgame.alliances import member_ids, membership, player_named
from refgame.commands import CommandTx
from refgame.errors import InvalidTarget, NotFound, NotInAlliance
from refgame.models import Message
from webfront.validation import Id, Out, PlayerName, Query, StrictBody

SUBJECT_MAX = 80  # characters
BODY_MAX = 2000  # characters
PAGE_MAX = 50  # messages per page
READ_MAX = 100  # messages marked read by one command
# text direction overrides and isolates would let a message display as something else
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _text(value: str, *, lines: bool) -> str:
    value = unicodedata.normalize("NFC", value).strip()
    for ch in value:
        category = unicodedata.category(ch)
        allowed = lines and ch in "\n\t"
        if (category in ("Cc", "Cs", "Co", "Cn") and not allowed) or ch in _BIDI:
            raise ValueError("must not contain control, unassigned or direction characters")
    return value


def _subject(value: str) -> str:
    return _text(value, lines=False)


def _body(value: str) -> str:
    value = _text(value, lines=True)
    if not value:
        raise ValueError("must not be empty")
    return value


async def send(
    tx: CommandTx,
    player_id: int,
    to: str | None,
    to_alliance: bool,
    subject: str,
    body: str,
) -> dict[str, Any]:
    if (to is None) == (not to_alliance):
        raise InvalidTarget("send to a player (to) or to your alliance (to_alliance), not both")
    if to is not None:
        target = await player_named(tx.session, to)
        if target is None:
            raise NotFound("there is no player of that name")
        if target == player_id:
            raise InvalidTarget("you cannot write to yourself")
        recipients = [target]
    else:
        mine = await membership(tx.session, player_id)
        if mine is None:
            raise NotInAlliance("you are not in an alliance")
        recipients = await member_ids(tx.session, mine[0])
    sender = (await tx.session.execute(select(Player.name).where(Player.id == player_id))).scalar()
    await tx.session.execute(
        insert(Message),
        [
            {"recipient_id": r, "sender_id": player_id, "sender_name": sender or "",
             "to_alliance": to_alliance, "subject": subject, "body": body,
             "created_ms": tx.now_ms, "is_read": r == player_id}
            for r in recipients
        ],
    )  # fmt: skip
    tx.touch_players(recipients)
    return {"recipients": len(recipients), "to_alliance": to_alliance}


async def mark_read(tx: CommandTx, player_id: int, message_ids: list[int]) -> dict[str, Any]:
    mine = Message.recipient_id == player_id
    found = (
        await tx.session.execute(select(func.count()).where(mine, Message.id.in_(message_ids)))
    ).scalar_one()
    if found != len(set(message_ids)):
        raise NotFound("you have no such message")
    done = await tx.session.execute(
        update(Message)
        .where(mine, Message.id.in_(message_ids), Message.is_read == false())
        .values(is_read=True)
    )
    marked = int(done.rowcount or 0)  # type: ignore[attr-defined]
    if marked:
        tx.touch_players([player_id])
    return {"marked": marked}


async def inbox(
    session: AsyncSession, player_id: int, limit: int, before_id: int | None
) -> dict[str, Any]:
    """A page of the player's messages, newest first; the next page starts before the last."""
    mine = Message.recipient_id == player_id
    stmt = select(
        Message.id, Message.sender_id, Message.sender_name, Message.to_alliance,
        Message.subject, Message.body, Message.created_ms, Message.is_read,
    ).where(mine)  # fmt: skip
    if before_id is not None:
        stmt = stmt.where(Message.id < before_id)
    rows = (await session.execute(stmt.order_by(Message.id.desc()).limit(limit + 1))).all()
    unread = (
        await session.execute(select(func.count()).where(mine, Message.is_read == false()))
    ).scalar_one()
    messages = [
        {"id": r.id, "sender_id": r.sender_id, "sender_name": r.sender_name,
         "to_alliance": bool(r.to_alliance), "subject": r.subject, "body": r.body,
         "created_ms": r.created_ms, "is_read": bool(r.is_read)}
        for r in rows[:limit]
    ]  # fmt: skip
    more = len(rows) > limit
    return {
        "messages": messages,
        "unread": int(unread),
        "next_before_id": messages[-1]["id"] if more else None,
    }


# --- HTTP routes ------------------------------------------------------------------------------

Subject = Annotated[str, Field(max_length=SUBJECT_MAX), AfterValidator(_subject)]
Body = Annotated[str, Field(min_length=1, max_length=BODY_MAX), AfterValidator(_body)]


class SendBody(StrictBody):
    to: PlayerName | None = Field(None, description="a player's name; or set to_alliance")
    to_alliance: bool = Field(False, description="to every member of your alliance, you too")
    subject: Subject = ""
    body: Body


class ReadBody(StrictBody):
    message_ids: list[Id] = Field(min_length=1, max_length=READ_MAX)


class InboxQuery(Query):
    limit: int = Field(20, ge=1, le=PAGE_MAX)
    before_id: Id | None = Field(None, description="the previous page's next_before_id")


class SentOut(Out):
    recipients: int
    to_alliance: bool


class MarkedOut(Out):
    marked: int = Field(description="how many were unread")


class MessageOut(Out):
    id: int
    sender_id: int | None
    sender_name: str
    to_alliance: bool
    subject: str
    body: str
    created_ms: int
    is_read: bool


class InboxOut(Out):
    messages: list[MessageOut]
    unread: int
    next_before_id: int | None = Field(description="null on the last page")


async def _send(tx: CommandTx, player_id: int, body: SendBody) -> dict[str, Any]:
    return await send(tx, player_id, body.to, body.to_alliance, body.subject, body.body)


async def _read(tx: CommandTx, player_id: int, body: ReadBody) -> dict[str, Any]:
    return await mark_read(tx, player_id, body.message_ids)


async def _inbox(session: AsyncSession, player_id: int, query: InboxQuery) -> dict[str, Any]:
    return await inbox(session, player_id, query.limit, query.before_id)


ROUTES = [
    CommandRoute("messages/send", SendBody, _send, "Write to a player or your alliance", SentOut),
    CommandRoute("messages/read", ReadBody, _read, "Mark messages read", MarkedOut),
]
QUERIES = [
    QueryRoute("messages", InboxQuery, _inbox, "A page of your messages, newest first", InboxOut),
]
