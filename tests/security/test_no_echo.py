"""Validation errors never echo what the client chose (issue 14, finding 4)."""

from __future__ import annotations

from typing import Any

from tests.security.conftest import register_game_player

SCRIPT = "<script>alert(1)</script>" + "A" * 40


async def test_a_chosen_troops_key_is_not_echoed(game_client: Any) -> None:
    player = await register_game_player(game_client, "echo_sec")
    body = {
        "village_id": player["village_id"],
        "kind": "attack",
        "x": 1,
        "y": 1,
        "troops": {SCRIPT: 1},
    }
    resp = await game_client.post("/api/march", json=body, headers=player["auth"])
    text = await resp.text()
    assert resp.status == 422, text
    assert "script" not in text and "AAAA" not in text
    error = (await resp.json())["error"]
    assert error["code"] == "invalid_request"
    assert all(d["field"].startswith("troops") for d in error["details"])


async def test_unknown_body_and_query_keys_are_not_echoed(game_client: Any) -> None:
    player = await register_game_player(game_client, "echo_sec2")
    resp = await game_client.post(
        "/api/march",
        json={"village_id": player["village_id"], "kind": "raid", "x": 0, "y": 0,
              "troops": {"legionnaire": 1}, SCRIPT: 1},
        headers=player["auth"],
    )  # fmt: skip
    text = await resp.text()
    assert resp.status == 422 and "script" not in text, text
    assert (await resp.json())["error"]["details"][0]["problem"] == "unknown field"
    for query in ("?<script>x</script>=1", "?<script>x</script>=1&<script>x</script>=2"):
        resp = await game_client.get(f"/api/reports{query}", headers=player["auth"])
        text = await resp.text()
        assert resp.status == 422 and "script" not in text, (query, text)


async def test_a_bad_value_is_not_quoted_back(game_client: Any) -> None:
    player = await register_game_player(game_client, "echo_sec3")
    resp = await game_client.post(
        "/api/march",
        json={"village_id": player["village_id"], "kind": SCRIPT, "x": 0, "y": 0,
              "troops": {"legionnaire": 1}},
        headers=player["auth"],
    )  # fmt: skip
    text = await resp.text()
    assert resp.status == 422 and "script" not in text, text
    assert (await resp.json())["error"]["details"][0]["field"] == "kind"
