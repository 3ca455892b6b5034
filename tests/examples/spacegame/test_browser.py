"""The space game's page, played in Debian's Chromium against the real stack.

webfront and gameserver run as subprocesses (``GAME=examples.spacegame``) on a
fresh SQLite world migrated with the game's branch, at world speed 200. alice
registers in the page, upgrades her metal mine (the order shows, then the
level), and attacks bob (registered through the API; the test gives alice
fighters in the database): the battle report appears in the page. Everything
runs under the strict CSP (no inline script or style).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright
from redis import Redis

from common.snapshot_versions import push_channel, version_key
from gameapi import to_fixed
from tests.browser.stack import (
    PASSWORD,
    Stack,
    enforce_csp,
    launch_chromium,
    register,
    run_stack,
)
from tests.conftest import TEST_REDIS_URL
from tests.examples.spacegame.conftest import GAME, _migrate

pytestmark = pytest.mark.slow

WAIT_MS = 60_000


@pytest.fixture
def stack(redis_prefix: str, tmp_path: Path) -> Iterator[Stack]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'space.db'}"
    asyncio.run(_migrate(url))
    env = {"WORLD_SPEED": "200", "MAP_RADIUS": "5"}
    with run_stack(url, redis_prefix, tmp_path, game=GAME, env=env) as running:
        yield running


def give_fighters(stack: Stack, name: str, count: int) -> None:
    """Fighters, and deuterium for their fuel (a new planet has none), into the DB."""
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        player, place = db.execute(
            "SELECT p.id, v.id FROM players p JOIN villages v ON v.player_id = p.id "
            "WHERE p.name = ?",
            (name,),
        ).fetchone()
        db.execute(
            "UPDATE sg_ships SET count = ? WHERE place_id = ? AND name = 'light_fighter'",
            (count, place),
        )
        db.execute(
            "UPDATE village_stock SET deuterium = ? WHERE village_id = ?",
            (to_fixed(2_000), place),
        )
    client = Redis.from_url(TEST_REDIS_URL)  # the page must see the change: bump the version
    version = client.incr(version_key(stack.redis_prefix, player))
    client.publish(push_channel(stack.redis_prefix), f"v {player}:{version}")  # and push it
    client.close()


def test_build_and_attack_in_chromium(stack: Stack) -> None:
    bob = register(stack.url, "bob")
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(WAIT_MS)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            enforce_csp(page, f"{stack.url}/", errors)
            page.goto(stack.url)

            page.get_by_label("Name", exact=True).fill("alice")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Register").click()
            # 500 and growing
            expect(page.locator("#res-metal")).to_have_text(re.compile(r"^5\d\d$"))
            expect(page.locator("#player-name")).to_have_text("alice")

            page.locator("[data-building=metal_mine]").click()
            expect(page.locator("#orders li")).to_contain_text("metal mine 1")
            mine = page.locator("#buildings tr", has_text="metal mine").locator("td").nth(1)
            expect(mine).to_have_text("1")
            expect(page.locator("#orders li")).to_have_count(0)

            give_fighters(stack, "alice", 5)
            ships = page.locator("#ships tr", has_text="light fighter").locator("td").nth(1)
            expect(ships).to_have_text("5")
            page.get_by_label("Target planet id").fill(str(bob["village_id"]))
            page.locator("#fleet-light_fighter").fill("5")
            page.get_by_role("button", name="Send fleet").click()
            expect(page.locator("#message")).to_have_text("fleet sent")
            expect(page.locator("#reports li")).to_contain_text("attacker won")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
