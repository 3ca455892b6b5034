"""Alliances through the web tier on SQLite and PostgreSQL: found, invite, join, leave,
kick, promote; the snapshot's ``alliance`` part; refusals that change nothing; and one
alliance per player held by the database when joins race."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from common.settings import Settings
from refgame.models import Alliance, AllianceInvitation, AllianceMember
from tests.refgame.http_players import (
    changed_since,
    count,
    etag,
    get,
    make_client,
    post,
    register,
    snapshot,
)


@pytest.fixture
async def client(aiohttp_client: Any, settings: Settings, redis: Redis) -> Any:
    return await make_client(aiohttp_client, settings)


async def _found(client: Any, who: dict[str, Any], name: str, tag: str) -> int:
    status, body = await post(client, who, "alliance/create", {"name": name, "tag": tag})
    assert status == 200, body
    return int(body["alliance_id"])


async def _join(client: Any, leader: dict[str, Any], who: dict[str, Any], alliance: int) -> None:
    status, body = await post(client, leader, "alliance/invite", {"name": who["name"]})
    assert status == 200, body
    status, body = await post(client, who, "alliance/accept", {"alliance_id": alliance})
    assert status == 200, body


async def test_found_invite_join_and_leave_through_the_snapshot(
    client: Any, settings: Settings
) -> None:
    alice, bob = await register(client, "alice"), await register(client, "bob")
    assert (await snapshot(client, alice))["alliance"] is None
    wolves = await _found(client, alice, "Iron Wolves", "WOLF")
    snap = await snapshot(client, alice)
    assert snap["alliance"] == {"id": wolves, "name": "Iron Wolves", "tag": "WOLF",
                                "role": "founder", "members": [alice["player_id"]]}  # fmt: skip

    bob_tag = await etag(client, bob)
    status, _ = await post(client, alice, "alliance/invite", {"name": "BOB"})  # look-alike
    assert status == 200
    assert await changed_since(client, bob, bob_tag)
    assert (await snapshot(client, bob))["alliance_invitations"] == 1
    status, view = await get(client, bob, "alliance")
    assert status == 200 and view["alliance"] is None
    assert [(i["alliance_id"], i["tag"]) for i in view["invitations"]] == [(wolves, "WOLF")]

    alice_tag = await etag(client, alice)
    status, body = await post(client, bob, "alliance/accept", {"alliance_id": wolves})
    assert status == 200 and body["role"] == "member"
    assert await changed_since(client, alice, alice_tag)  # a member joined: alice's changed
    both = sorted([alice["player_id"], bob["player_id"]])
    for who, role in ((alice, "founder"), (bob, "member")):
        snap = await snapshot(client, who)
        assert snap["alliance"]["members"] == both and snap["alliance"]["role"] == role
    assert (await snapshot(client, bob))["alliance_invitations"] == 0
    status, view = await get(client, alice, "alliance")
    assert [(m["name"], m["role"]) for m in view["alliance"]["members"]] == [
        ("alice", "founder"), ("bob", "member")]  # fmt: skip

    # the founder leaves: the one member left founds it; the last one out dissolves it
    status, body = await post(client, alice, "alliance/leave", {})
    assert status == 200 and body["founder"] == bob["player_id"] and not body["dissolved"]
    assert (await snapshot(client, alice))["alliance"] is None
    snap = await snapshot(client, bob)
    assert snap["alliance"]["role"] == "founder" and snap["alliance"]["members"] == [
        bob["player_id"]]  # fmt: skip
    status, body = await post(client, bob, "alliance/leave", {})
    assert status == 200 and body["dissolved"]
    assert await count(settings, Alliance) == 0 and await count(settings, AllianceMember) == 0


async def test_leadership_passes_to_a_leader_first_and_the_founder_kicks(
    client: Any, settings: Settings
) -> None:
    alice, bob, carol, dave = [await register(client, n) for n in ("alice", "bob", "carol", "dave")]
    wolves = await _found(client, alice, "Iron Wolves", "WOLF")
    for who in (bob, carol, dave):
        await _join(client, alice, who, wolves)
    status, body = await post(client, carol, "alliance/invite", {"name": "erin"})
    assert status == 403 and body["error"]["code"] == "not_a_leader"
    status, _ = await post(client, alice, "alliance/promote",
                           {"player_id": carol["player_id"], "role": "leader"})  # fmt: skip
    assert status == 200
    erin = await register(client, "erin")
    status, _ = await post(client, carol, "alliance/invite", {"name": "erin"})
    assert status == 200  # a leader invites
    status, body = await post(client, carol, "alliance/kick", {"player_id": bob["player_id"]})
    assert status == 403 and body["error"]["code"] == "not_a_leader"
    status, _ = await post(client, alice, "alliance/kick", {"player_id": dave["player_id"]})
    assert status == 200
    assert (await snapshot(client, dave))["alliance"] is None
    # bob joined before carol, but carol leads: she founds it now
    status, body = await post(client, alice, "alliance/leave", {})
    assert status == 200 and body["founder"] == carol["player_id"]
    roles = {m["player_id"]: m["role"] for m in (await get(client, bob, "alliance"))[1][
        "alliance"]["members"]}  # fmt: skip
    assert roles == {bob["player_id"]: "member", carol["player_id"]: "founder"}
    status, _ = await post(client, erin, "alliance/accept", {"alliance_id": wolves})
    assert status == 200
    assert (await snapshot(client, carol))["alliance"]["members"] == sorted(
        [bob["player_id"], carol["player_id"], erin["player_id"]])  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("alliance/create", {"name": "x" * 25, "tag": "LONG"}, 422, "invalid_request"),
        ("alliance/create", {"name": "ab", "tag": "AB"}, 422, "invalid_request"),
        ("alliance/create", {"name": "Wolves\u0000", "tag": "AB"}, 422, "invalid_request"),
        ("alliance/create", {"name": "Other Pack", "tag": "TOOLONG"}, 422, "invalid_request"),
        ("alliance/create", {"name": "Other Pack", "tag": "W-1"}, 422, "invalid_request"),
        ("alliance/create", {"name": "Other Pack", "tag": "WÖLF"}, 422, "invalid_request"),
        ("alliance/create", {"name": "Other Pack", "tag": "AB", "x": 1}, 422, "invalid_request"),
        ("alliance/create", {"name": "IRON WOLVES", "tag": "AB"}, 409, "name_taken"),
        ("alliance/create", {"name": "Other Pack", "tag": "wolf"}, 409, "name_taken"),
        ("alliance/invite", {"name": "x" * 65}, 422, "invalid_request"),
        ("alliance/invite", {"name": "alice"}, 409, "not_in_alliance"),
        ("alliance/accept", {"alliance_id": 1}, 404, "not_found"),
        ("alliance/accept", {"alliance_id": "1"}, 422, "invalid_request"),
        ("alliance/decline", {"alliance_id": 99}, 404, "not_found"),
        ("alliance/leave", {}, 409, "not_in_alliance"),
        ("alliance/kick", {"player_id": 1}, 409, "not_in_alliance"),
        ("alliance/promote", {"player_id": 1, "role": "founder"}, 422, "invalid_request"),
    ],
)  # fmt: skip
async def test_bad_alliance_requests_change_nothing(
    client: Any, settings: Settings, path: str, body: dict[str, Any], status: int, code: str
) -> None:
    alice, bob = await register(client, "alice"), await register(client, "bob")
    await _found(client, alice, "Iron Wolves", "WOLF")
    before = [await count(settings, t) for t in (Alliance, AllianceMember, AllianceInvitation)]
    got, answer = await post(client, bob, path, body)
    assert (got, answer["error"]["code"]) == (status, code), answer
    assert "x" * 25 not in str(answer)  # the client's text is not echoed
    after = [await count(settings, t) for t in (Alliance, AllianceMember, AllianceInvitation)]
    assert after == before


async def test_members_own_refusals(client: Any, settings: Settings) -> None:
    alice, bob = await register(client, "alice"), await register(client, "bob")
    wolves = await _found(client, alice, "Iron Wolves", "WOLF")
    for path, body, status, code in [
        ("alliance/invite", {"name": "alice"}, 400, "invalid_target"),
        ("alliance/invite", {"name": "nobody"}, 404, "not_found"),
        ("alliance/kick", {"player_id": alice["player_id"]}, 400, "invalid_target"),
        ("alliance/kick", {"player_id": bob["player_id"]}, 404, "not_found"),
        ("alliance/create", {"name": "Second Pack", "tag": "TWO"}, 409, "already_in_alliance"),
    ]:
        got, answer = await post(client, alice, path, body)
        assert (got, answer["error"]["code"]) == (status, code), (path, answer)
    await _join(client, alice, bob, wolves)
    carol = await register(client, "carol")
    await _found(client, carol, "Red Foxes", "FOX")
    status, body = await post(client, alice, "alliance/invite", {"name": "carol"})
    assert status == 409 and body["error"]["code"] == "already_in_alliance"
    # an invitation accepted from inside another alliance: double join refused
    status, _ = await post(client, carol, "alliance/invite", {"name": "dave"})
    assert status == 404
    dave = await register(client, "dave")
    await post(client, carol, "alliance/invite", {"name": "dave"})
    await post(client, alice, "alliance/invite", {"name": "dave"})
    status, _ = await post(client, dave, "alliance/accept", {"alliance_id": wolves})
    assert status == 200
    status, body = await post(client, dave, "alliance/accept", {"alliance_id": wolves + 1})
    assert status == 409 and body["error"]["code"] == "already_in_alliance"
    assert await count(settings, AllianceMember, AllianceMember.player_id == dave["player_id"]) == 1


async def test_concurrent_joins_exactly_one_wins(client: Any, settings: Settings) -> None:
    founders = [await register(client, f"founder{n}") for n in range(3)]
    ids = [await _found(client, f, f"Pack {n}", f"P{n}") for n, f in enumerate(founders)]
    founded = 0
    for round_ in range(3):
        joiner = await register(client, f"joiner{round_}")
        for founder in founders:
            await post(client, founder, "alliance/invite", {"name": joiner["name"]})
        tries = [post(client, joiner, "alliance/accept", {"alliance_id": a}) for a in ids]
        tries.append(post(client, joiner, "alliance/create",
                          {"name": f"Own Pack {round_}", "tag": f"OWN{round_}"}))  # fmt: skip
        answers = await asyncio.gather(*tries)
        statuses = sorted(status for status, _ in answers)
        assert statuses == [200, 409, 409, 409], answers
        assert {b["error"]["code"] for s, b in answers if s == 409} == {"already_in_alliance"}
        mine = AllianceMember.player_id == joiner["player_id"]
        assert await count(settings, AllianceMember, mine) == 1
        founded += sum(1 for s, b in answers if s == 200 and b["role"] == "founder")
    # the losing creates left no alliance behind
    assert await count(settings, Alliance) == 3 + founded
