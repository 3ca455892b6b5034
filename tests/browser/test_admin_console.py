"""The operator console in Debian's Chromium against the real stack.

webfront and gameserver run as subprocesses (the fixture of ``test_browser``); an
operator made with ``wgctl operator create`` logs in, sees the world at a glance
(with the running task server's status record), finds a player, bans them and sees
the ban in the audit log, replays a battle report from its seed; the player's next
command is refused with 403 ``banned``.
The page must run under its Content-Security-Policy without a single violation.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, expect, sync_playwright

from refgame.battle import battle_reports, resolve_battle
from tests.browser.stack import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    PASSWORD,
    WAIT_MS,
    Stack,
    register,
)
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.slow

WORLD_SPEED = 200  # the world of test_browser
MAP_RADIUS = 10

OPERATOR = "ops-browser"
OPERATOR_PASSWORD = "operator browser pass"


def create_operator(stack: Stack) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite+aiosqlite:///{stack.db_path}",
        "REDIS_URL": TEST_REDIS_URL,
    }
    made = subprocess.run(
        [str(Path(sys.executable).parent / "wgctl"), "operator", "create", OPERATOR,
         "--password-stdin"],
        input=f"{OPERATOR_PASSWORD}\n", env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr


def build(url: str, token: str, village_id: int) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"{url}/api/build",
        data=json.dumps({"village_id": village_id, "kind": "woodcutter"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def add_battle_report(stack: Stack, player_id: int) -> int:
    """A battle report as the game files it (the browser test has no time for a march)."""
    result = resolve_battle({"legionnaire": 30}, {"praetorian": 20}, 1, "raid", 987654321)
    body, _ = battle_reports(
        result, loot={}, attacker={"player_id": player_id}, defender={"player_id": None},
        time_ms=1,
    )  # fmt: skip
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        cursor = db.execute(
            "INSERT INTO reports (player_id, kind, title, body, created_ms, is_read) "
            "VALUES (?, 'battle', ?, ?, 1, 0)",
            (player_id, body["title"], json.dumps(body)),
        )
        return int(cursor.lastrowid or 0)


def test_operator_bans_a_player_in_chromium(stack: Stack) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"Debian's Chromium is missing at {CHROMIUM}: apt-get install chromium")
    create_operator(stack)
    mallory = register(stack.url, "mallory")
    report_id = add_battle_report(stack, int(mallory["player_id"]))
    assert PASSWORD  # mallory's password: the shared test one
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        # answers the page expects (401 before login, no favicon) are logged as errors too
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.set_default_timeout(WAIT_MS)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("console", on_console)
            page.goto(f"{stack.url}/admin")
            expect(page.locator("#login-section")).to_be_visible()
            page.fill("#login-name", OPERATOR)
            page.fill("#login-password", OPERATOR_PASSWORD)
            page.click("#login-form button[type=submit]")

            # the world at a glance, refreshed by itself: the task server's record arrives
            expect(page.locator("#operator-name")).to_have_text(OPERATOR)
            expect(page.locator("#cards")).to_contain_text("players")
            expect(page.locator("#servers tbody tr")).to_have_count(1)
            expect(page.locator("#partitions tbody tr")).to_have_count(16)
            expect(page.locator("td[data-health=redis]")).to_have_text("ok")
            expect(page.locator("td[data-health=db]")).to_have_text("ok")
            players = page.locator("div[data-card=players] .value")
            expect(players).to_have_text("1")
            register(stack.url, "trudy")  # the page sees it by itself, nothing clicked
            expect(players).to_have_text("2")
            page.screenshot(path=str(ARTIFACTS / "admin-overview.png"), full_page=True)

            page.fill("#player-name", "mall")
            page.click("#player-search button[type=submit]")
            page.click(f"a[data-player='{mallory['player_id']}']")
            expect(page.locator("#ban-state")).to_have_text("not banned")
            page.fill("#ban-reason", "cheating in the browser test")
            page.click("#ban")
            expect(page.locator("#ban-state")).to_contain_text("cheating in the browser test")
            expect(page.locator("#message")).to_contain_text("banned, 1 session(s) revoked")
            entry = page.locator("#audit-log tbody tr[data-action=ban]")
            expect(entry).to_have_count(1)
            expect(entry).to_contain_text(OPERATOR)
            expect(entry).to_contain_text(f"player:{mallory['player_id']}")
            page.screenshot(path=str(ARTIFACTS / "admin-banned.png"), full_page=True)

            page.fill("#report-id", str(report_id))
            page.click("#replay-form button[type=submit]")
            expect(page.locator("#replay-verdict")).to_have_text("replay equals the stored result")
            expect(page.locator("#audit-log tbody tr[data-action=replay]")).to_have_count(1)
        finally:
            browser.close()

    status, body = build(stack.url, str(mallory["token"]), int(mallory["village_id"]))
    assert status == 403 and body["error"]["code"] == "banned"  # type: ignore[index]
    assert problems == []  # no script error, no CSP violation
