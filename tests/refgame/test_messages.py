"""Messages through the web tier on SQLite and PostgreSQL: to a player and to an alliance,
the unread count in the snapshot, marking read, cursor pages, and refused input."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from common.settings import Settings
from refgame.messages import BODY_MAX, PAGE_MAX
from refgame.models import Message
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


async def _send(client: Any, who: dict[str, Any], **body: Any) -> dict[str, Any]:
    status, answer = await post(client, who, "messages/send", body)
    assert status == 200, answer
    return dict(answer)


async def test_a_message_to_a_player_counts_unread_until_read(client: Any) -> None:
    alice, bob = await register(client, "alice"), await register(client, "bob")
    tag = await etag(client, bob)
    text = "<b>hi</b> & see you\nat dawn"
    await _send(client, alice, to="Bob", subject="Plans", body=text)
    assert await changed_since(client, bob, tag)
    assert (await snapshot(client, bob))["unread_messages"] == 1
    assert (await snapshot(client, alice))["unread_messages"] == 0
    status, inbox = await get(client, bob, "messages")
    assert status == 200 and inbox["unread"] == 1 and inbox["next_before_id"] is None
    (message,) = inbox["messages"]
    assert message["body"] == text and message["subject"] == "Plans"  # stored as sent
    assert (message["sender_id"], message["sender_name"]) == (alice["player_id"], "alice")
    assert not message["to_alliance"] and not message["is_read"]
    assert (await get(client, alice, "messages"))[1]["messages"] == []  # not in her inbox

    status, body = await post(client, alice, "messages/read", {"message_ids": [message["id"]]})
    assert status == 404 and body["error"]["code"] == "not_found"  # not hers
    status, body = await post(client, bob, "messages/read", {"message_ids": [message["id"]]})
    assert status == 200 and body["marked"] == 1
    assert (await snapshot(client, bob))["unread_messages"] == 0
    status, body = await post(client, bob, "messages/read", {"message_ids": [message["id"]]})
    assert status == 200 and body["marked"] == 0


async def test_an_alliance_message_reaches_every_member(client: Any, settings: Settings) -> None:
    alice, bob, carol, dave = [await register(client, n) for n in ("alice", "bob", "carol", "dave")]
    status, created = await post(client, alice, "alliance/create", {"name": "Owls", "tag": "OWL"})
    assert status == 200
    for who in (bob, carol):
        await post(client, alice, "alliance/invite", {"name": who["name"]})
        await post(client, who, "alliance/accept", {"alliance_id": created["alliance_id"]})
    sent = await _send(client, bob, to_alliance=True, body="rally at the river")
    assert sent == {"recipients": 3, "to_alliance": True}
    assert await count(settings, Message) == 3
    unread = {w["name"]: (await snapshot(client, w))["unread_messages"]
              for w in (alice, bob, carol, dave)}  # fmt: skip
    assert unread == {"alice": 1, "bob": 0, "carol": 1, "dave": 0}  # bob's copy is read
    (copy,) = (await get(client, carol, "messages"))[1]["messages"]
    assert copy["to_alliance"] and copy["sender_name"] == "bob"
    status, body = await post(client, dave, "messages/send",
                              {"to_alliance": True, "body": "hello?"})  # fmt: skip
    assert status == 409 and body["error"]["code"] == "not_in_alliance"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"to": "bob", "body": "x" * (BODY_MAX + 1)}, 422, "invalid_request"),
        ({"to": "bob", "body": ""}, 422, "invalid_request"),
        ({"to": "bob", "body": "   \n "}, 422, "invalid_request"),
        ({"to": "bob", "body": "bell \u0007"}, 422, "invalid_request"),
        ({"to": "bob", "body": "evil \u202e txt.exe"}, 422, "invalid_request"),
        ({"to": "bob", "subject": "s" * 81, "body": "hi"}, 422, "invalid_request"),
        ({"to": "bob", "subject": "two\nlines", "body": "hi"}, 422, "invalid_request"),
        ({"to": "bob", "body": 5}, 422, "invalid_request"),
        ({"to": "bob", "body": "hi", "html": True}, 422, "invalid_request"),
        ({"body": "hi"}, 400, "invalid_target"),
        ({"to": "bob", "to_alliance": True, "body": "hi"}, 400, "invalid_target"),
        ({"to": "nobody", "body": "hi"}, 404, "not_found"),
        ({"to": "alice", "body": "hi"}, 400, "invalid_target"),
        ({"to_alliance": True, "body": "hi"}, 409, "not_in_alliance"),
    ],
)  # fmt: skip
async def test_bad_messages_change_nothing(
    client: Any, settings: Settings, body: dict[str, Any], status: int, code: str
) -> None:
    alice = await register(client, "alice")
    await register(client, "bob")
    got, answer = await post(client, alice, "messages/send", body)
    assert (got, answer["error"]["code"]) == (status, code), answer
    assert "x" * 100 not in str(answer)
    assert await count(settings, Message) == 0


async def test_the_inbox_pages_with_a_cursor(client: Any) -> None:
    alice, bob = await register(client, "alice"), await register(client, "bob")
    for n in range(25):
        await _send(client, alice, to="bob", body=f"message {n}")
    assert (await snapshot(client, bob))["unread_messages"] == 25
    seen: list[str] = []
    cursor: int | None = None
    pages = 0
    while True:
        query = {"limit": 10} if cursor is None else {"limit": 10, "before_id": cursor}
        status, page = await get(client, bob, "messages", **query)
        assert status == 200 and page["unread"] == 25
        seen += [m["body"] for m in page["messages"]]
        pages += 1
        cursor = page["next_before_id"]
        if cursor is None:
            break
    assert pages == 3 and seen == [f"message {n}" for n in reversed(range(25))]
    queries: list[dict[str, Any]] = [
        {"limit": 0},
        {"limit": PAGE_MAX + 1},
        {"before_id": "abc"},
        {"before_id": 0},
        {"page": 2},
    ]
    for query in queries:  # fmt: skip
        status, body = await get(client, bob, "messages", **query)
        assert status == 422 and body["error"]["code"] == "invalid_request", query
    bodies: list[dict[str, Any]] = [
        {"message_ids": []},
        {"message_ids": list(range(1, 102))},
        {"message_ids": [0]},
        {"message_ids": ["1"]},
    ]
    for bad in bodies:  # fmt: skip
        status, _ = await post(client, bob, "messages/read", bad)
        assert status == 422, bad
    assert (await snapshot(client, bob))["unread_messages"] == 25


async def test_reports_come_in_pages(client: Any) -> None:
    """The client pages battle reports with the reports list's page and per_page."""
    alice = await register(client, "alice")
    status, page = await get(client, alice, "reports", page=1, per_page=5)
    assert status == 200 and (page["page"], page["per_page"], page["total"]) == (1, 5, 0)
    status, _ = await get(client, alice, "reports", per_page=101)
    assert status == 422
