"""Alliances: create, invite, accept or decline, leave, kick, promote; and the alliance view.

A player is in at most one alliance: ``alliance_members.player_id`` is its primary key,
so of two concurrent joins one commits and the other runs again (the web tier retries a
constraint race) and is refused by the check. Every change of an alliance's members
first updates its row (``_lock``): that orders the changes of one alliance, so a
founder's succession never picks a member who is leaving at the same moment.

Roles: one ``founder`` (invites, kicks, promotes), ``leader`` (invites), ``member``.
When the founder leaves, the longest-standing leader becomes founder, else the
longest-standing member (ties by player id); the last member leaving dissolves the
alliance (its invitations go with it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from common.names import name_key
from db.models import Player
from gameapi.routes import CommandRoute, QueryRoute
from refgame.commands import CommandTx
from refgame.errors import (
    AllianceFull,
    AlreadyInAlliance,
    EventsPending,
    InvalidTarget,
    NameTaken,
    NotALeader,
    NotFound,
    NotInAlliance,
)
from refgame.models import Alliance, AllianceInvitation, AllianceMember
from webfront.validation import Id, Out, PlayerName, Query, StrictBody

MAX_MEMBERS = 30  # members of one alliance (an alliance message is one row per member)
MAX_INVITATIONS = 30  # pending invitations of one alliance
LEADING = ("founder", "leader")  # may invite

Member = tuple[int, str]  # (alliance id, role)


async def membership(session: AsyncSession, player_id: int) -> Member | None:
    row = (
        await session.execute(
            select(AllianceMember.alliance_id, AllianceMember.role).where(
                AllianceMember.player_id == player_id
            )
        )
    ).first()
    return None if row is None else (int(row[0]), str(row[1]))


async def member_ids(session: AsyncSession, alliance_id: int) -> list[int]:
    rows = await session.execute(
        select(AllianceMember.player_id)
        .where(AllianceMember.alliance_id == alliance_id)
        .order_by(AllianceMember.player_id)
    )
    return [int(p) for p in rows.scalars()]


async def player_named(session: AsyncSession, name: str) -> int | None:
    """The id of the player called ``name`` (look-alikes match, as at login)."""
    found = await session.execute(select(Player.id).where(Player.name_key == name_key(name)))
    return found.scalar()


async def _lock(tx: CommandTx, alliance_id: int) -> None:
    """Take the alliance's row for this transaction (its changes run one after another)."""
    done = await tx.session.execute(
        update(Alliance).where(Alliance.id == alliance_id).values(changed_ms=tx.now_ms)
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]
        raise NotFound("that alliance no longer exists")


async def _locked_membership(tx: CommandTx, player_id: int) -> Member:
    """The player's alliance and role, read again after taking the alliance's row."""
    mine = await membership(tx.session, player_id)
    if mine is None:
        raise NotInAlliance("you are not in an alliance")
    await _lock(tx, mine[0])
    now = await membership(tx.session, player_id)
    if now is None:
        raise NotInAlliance("you are not in an alliance")
    if now[0] != mine[0]:
        raise EventsPending("your alliance changed just now; retry")
    return now


async def create(tx: CommandTx, player_id: int, name: str, tag: str) -> dict[str, Any]:
    if await membership(tx.session, player_id) is not None:
        raise AlreadyInAlliance("leave your alliance before founding one")
    key, tag_key = name_key(name), tag.upper()
    taken = await tx.session.execute(
        select(Alliance.id).where(or_(Alliance.name_key == key, Alliance.tag_key == tag_key))
    )
    if taken.first() is not None:
        raise NameTaken("an alliance with this name or tag exists")
    alliance_id = (
        await tx.session.execute(
            insert(Alliance)
            .values(name=name, name_key=key, tag=tag, tag_key=tag_key,
                    created_ms=tx.now_ms, changed_ms=tx.now_ms)
            .returning(Alliance.id)
        )
    ).scalar_one()  # fmt: skip
    await tx.session.execute(
        insert(AllianceMember).values(
            player_id=player_id, alliance_id=alliance_id, role="founder", joined_ms=tx.now_ms
        )
    )
    tx.touch_players([player_id])
    return {"alliance_id": alliance_id, "name": name, "tag": tag, "role": "founder"}


async def invite(tx: CommandTx, player_id: int, name: str) -> dict[str, Any]:
    alliance_id, role = await _locked_membership(tx, player_id)
    if role not in LEADING:
        raise NotALeader("only the founder or a leader may invite")
    target = await player_named(tx.session, name)
    if target is None:
        raise NotFound("there is no player of that name")
    if target == player_id:
        raise InvalidTarget("you cannot invite yourself")
    if await membership(tx.session, target) is not None:
        raise AlreadyInAlliance("that player is already in an alliance")
    invited = AllianceInvitation
    pending = (
        await tx.session.execute(
            select(func.count(), func.count().filter(invited.player_id == target)).where(
                invited.alliance_id == alliance_id
            )
        )
    ).one()
    if not pending[1]:
        if pending[0] >= MAX_INVITATIONS:
            raise AllianceFull(f"an alliance has at most {MAX_INVITATIONS} pending invitations")
        await tx.session.execute(
            insert(invited).values(
                alliance_id=alliance_id,
                player_id=target,
                invited_by=player_id,
                created_ms=tx.now_ms,
            )
        )
        tx.touch_players([target, player_id])
    return {"alliance_id": alliance_id, "player_id": target}


async def accept(tx: CommandTx, player_id: int, alliance_id: int) -> dict[str, Any]:
    invited = AllianceInvitation
    mine = (invited.alliance_id == alliance_id) & (invited.player_id == player_id)
    if (await tx.session.execute(select(invited.created_ms).where(mine))).first() is None:
        raise NotFound("you have no invitation from that alliance")
    if await membership(tx.session, player_id) is not None:
        raise AlreadyInAlliance("leave your alliance before joining another")
    await _lock(tx, alliance_id)
    members = await member_ids(tx.session, alliance_id)
    if len(members) >= MAX_MEMBERS:
        raise AllianceFull(f"an alliance has at most {MAX_MEMBERS} members")
    if not (await tx.session.execute(delete(invited).where(mine))).rowcount:  # type: ignore[attr-defined]
        raise NotFound("you have no invitation from that alliance")
    # a concurrent join of this player fails here (primary key) and runs again
    await tx.session.execute(
        insert(AllianceMember).values(
            player_id=player_id, alliance_id=alliance_id, role="member", joined_ms=tx.now_ms
        )
    )
    tx.touch_players([*members, player_id])
    return {"alliance_id": alliance_id, "role": "member"}


async def decline(tx: CommandTx, player_id: int, alliance_id: int) -> dict[str, Any]:
    invited = AllianceInvitation
    done = await tx.session.execute(
        delete(invited).where(invited.alliance_id == alliance_id, invited.player_id == player_id)
    )
    if not done.rowcount:  # type: ignore[attr-defined]
        raise NotFound("you have no invitation from that alliance")
    tx.touch_players([player_id])
    return {"alliance_id": alliance_id, "declined": True}


async def leave(tx: CommandTx, player_id: int) -> dict[str, Any]:
    alliance_id, role = await _locked_membership(tx, player_id)
    members = await member_ids(tx.session, alliance_id)
    await tx.session.execute(delete(AllianceMember).where(AllianceMember.player_id == player_id))
    result: dict[str, Any] = {"alliance_id": alliance_id, "dissolved": False, "founder": None}
    if role == "founder":
        m = AllianceMember
        successor = (
            await tx.session.execute(
                select(m.player_id)
                .where(m.alliance_id == alliance_id)
                .order_by((m.role == "leader").desc(), m.joined_ms, m.player_id)
                .limit(1)
            )
        ).scalar()
        if successor is None:
            await tx.session.execute(delete(Alliance).where(Alliance.id == alliance_id))
            result["dissolved"] = True
        else:
            await tx.session.execute(
                update(m).where(m.player_id == successor).values(role="founder")
            )
            result["founder"] = int(successor)
    tx.touch_players(members)
    return result


async def _founder_over(tx: CommandTx, player_id: int, target: int) -> int:
    """The founder's alliance, with ``target`` one of its other members."""
    alliance_id, role = await _locked_membership(tx, player_id)
    if role != "founder":
        raise NotALeader("only the founder may do this")
    if target == player_id:
        raise InvalidTarget("not on yourself (leave the alliance instead)")
    theirs = await membership(tx.session, target)
    if theirs is None or theirs[0] != alliance_id:
        raise NotFound("that player is not in your alliance")
    return alliance_id


async def kick(tx: CommandTx, player_id: int, target: int) -> dict[str, Any]:
    alliance_id = await _founder_over(tx, player_id, target)
    members = await member_ids(tx.session, alliance_id)
    await tx.session.execute(delete(AllianceMember).where(AllianceMember.player_id == target))
    tx.touch_players(members)
    return {"alliance_id": alliance_id, "player_id": target, "kicked": True}


async def promote(tx: CommandTx, player_id: int, target: int, role: str) -> dict[str, Any]:
    alliance_id = await _founder_over(tx, player_id, target)
    m = AllianceMember
    await tx.session.execute(update(m).where(m.player_id == target).values(role=role))
    tx.touch_players(await member_ids(tx.session, alliance_id))
    return {"alliance_id": alliance_id, "player_id": target, "role": role}


async def view(session: AsyncSession, player_id: int) -> dict[str, Any]:
    """The player's alliance (members with names and roles; the invitations it sent, to
    its founder and leaders) and the invitations the player received."""
    a, m, inv = Alliance, AllianceMember, AllianceInvitation
    received = await session.execute(
        select(a.id, a.name, a.tag, inv.created_ms)
        .join(a, a.id == inv.alliance_id)
        .where(inv.player_id == player_id)
        .order_by(inv.created_ms.desc(), a.id)
    )
    out: dict[str, Any] = {
        "alliance": None,
        "invitations": [
            {"alliance_id": r.id, "name": r.name, "tag": r.tag, "created_ms": r.created_ms}
            for r in received
        ],
    }
    mine = await membership(session, player_id)
    if mine is None:
        return out
    alliance_id, role = mine
    row = (await session.execute(select(a.name, a.tag).where(a.id == alliance_id))).one()
    members = await session.execute(
        select(m.player_id, Player.name, m.role, m.joined_ms)
        .join(Player, Player.id == m.player_id)
        .where(m.alliance_id == alliance_id)
        .order_by(m.joined_ms, m.player_id)
    )
    sent: list[dict[str, Any]] = []
    if role in LEADING:
        sent = [
            {"player_id": r.id, "name": r.name, "created_ms": r.created_ms}
            for r in await session.execute(
                select(Player.id, Player.name, inv.created_ms)
                .join(Player, Player.id == inv.player_id)
                .where(inv.alliance_id == alliance_id)
                .order_by(inv.created_ms, Player.id)
            )
        ]
    out["alliance"] = {
        "id": alliance_id,
        "name": row.name,
        "tag": row.tag,
        "role": role,
        "members": [
            {"player_id": r.player_id, "name": r.name, "role": r.role, "joined_ms": r.joined_ms}
            for r in members
        ],
        "invitations_sent": sent,
    }
    return out


# --- HTTP routes ------------------------------------------------------------------------------


def _check_tag(value: str) -> str:
    if not value.isascii() or not value.isalnum():
        raise ValueError("must be letters A-Z and digits only")
    return value


AllianceName = PlayerName  # NFKC, spaces collapsed, 3-24 characters; look-alikes collide
Tag = Annotated[
    str,
    Field(min_length=2, max_length=6, description="2-6 letters A-Z or digits, unique in any case"),
    AfterValidator(_check_tag),
]


class CreateBody(StrictBody):
    name: AllianceName
    tag: Tag


class InviteBody(StrictBody):
    name: PlayerName = Field(description="the invited player's name")


class AllianceIdBody(StrictBody):
    alliance_id: Id


class LeaveBody(StrictBody):
    pass


class KickBody(StrictBody):
    player_id: Id


class PromoteBody(StrictBody):
    player_id: Id
    role: Literal["leader", "member"]


class AllianceQuery(Query):
    pass


class AllianceResultOut(Out):
    alliance_id: int
    name: str | None = None
    tag: str | None = None
    role: str | None = None
    player_id: int | None = None
    declined: bool | None = None
    dissolved: bool | None = None
    founder: int | None = None
    kicked: bool | None = None


class MemberOut(Out):
    player_id: int
    name: str
    role: str
    joined_ms: int


class SentOut(Out):
    player_id: int
    name: str
    created_ms: int


class MyAllianceOut(Out):
    id: int
    name: str
    tag: str
    role: str
    members: list[MemberOut]
    invitations_sent: list[SentOut] = Field(description="empty unless founder or leader")


class InvitationOut(Out):
    alliance_id: int
    name: str
    tag: str
    created_ms: int


class AllianceViewOut(Out):
    alliance: MyAllianceOut | None
    invitations: list[InvitationOut]


async def _create(tx: CommandTx, player_id: int, body: CreateBody) -> dict[str, Any]:
    return await create(tx, player_id, body.name, body.tag)


async def _invite(tx: CommandTx, player_id: int, body: InviteBody) -> dict[str, Any]:
    return await invite(tx, player_id, body.name)


async def _accept(tx: CommandTx, player_id: int, body: AllianceIdBody) -> dict[str, Any]:
    return await accept(tx, player_id, body.alliance_id)


async def _decline(tx: CommandTx, player_id: int, body: AllianceIdBody) -> dict[str, Any]:
    return await decline(tx, player_id, body.alliance_id)


async def _leave(tx: CommandTx, player_id: int, body: LeaveBody) -> dict[str, Any]:
    return await leave(tx, player_id)


async def _kick(tx: CommandTx, player_id: int, body: KickBody) -> dict[str, Any]:
    return await kick(tx, player_id, body.player_id)


async def _promote(tx: CommandTx, player_id: int, body: PromoteBody) -> dict[str, Any]:
    return await promote(tx, player_id, body.player_id, body.role)


async def _view(session: AsyncSession, player_id: int, query: AllianceQuery) -> dict[str, Any]:
    return await view(session, player_id)


_OUT = AllianceResultOut
ROUTES = [
    CommandRoute("alliance/create", CreateBody, _create, "Found an alliance", _OUT),
    CommandRoute("alliance/invite", InviteBody, _invite, "Invite a player (founder, leaders)",
                 _OUT),
    CommandRoute("alliance/accept", AllianceIdBody, _accept, "Join an alliance that invited you",
                 _OUT),
    CommandRoute("alliance/decline", AllianceIdBody, _decline, "Decline an invitation", _OUT),
    CommandRoute("alliance/leave", LeaveBody, _leave, "Leave your alliance", _OUT),
    CommandRoute("alliance/kick", KickBody, _kick, "Remove a member (founder)", _OUT),
    CommandRoute("alliance/promote", PromoteBody, _promote, "Make a member leader or member "
                 "(founder)", _OUT),
]  # fmt: skip
QUERIES = [
    QueryRoute("alliance", AllianceQuery, _view, "Your alliance and your invitations",
               AllianceViewOut),
]  # fmt: skip
