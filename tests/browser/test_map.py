"""The map in Debian's Chromium: pan, jump, point at a village, send troops there.

The README's quick-try world (``WORLD_SPEED=50 MAP_RADIUS=15``) runs as subprocesses
on a fresh SQLite world. alice registers in the page, bob through the API just
after her (the placement puts him beside her). alice pans the map with the arrow
keys and by dragging, jumps to coordinates (bad ones are refused beside the
fields), points at bob's village (owner, population, distance and the chosen
troops' travel time show) and uses "Send troops here", which fills the march
form's target. A bot from ``wgctl worldgen`` and, once the client is told of an
alliance, bob's village get their own marks. The test gives alice ten
legionnaires and moves the bot's village beside hers in the database.
Screenshot: ``artifacts/browser/map.png``.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from refgame.travel import march_duration_ms
from refgame.world import STARTING_BUILDINGS
from tests.browser.stack import (
    ARTIFACTS,
    REPO,
    WAIT_MS,
    Stack,
    ensure_troops,
    launch_chromium,
    new_page,
    place_next_to,
    player_id,
    register,
    register_in_page,
    spot,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 50  # the README's quick try
MAP_RADIUS = 15
VIEW_CELLS = 9  # map.js: (2 × VIEW_RADIUS + 1) cells a side


def _add_bot_beside(stack: Stack, sqlite_url: str, player: int) -> tuple[int, int]:
    """One bot from ``wgctl worldgen``, its village moved two fields from ``player``'s."""
    env = {**os.environ, "DATABASE_URL": sqlite_url, "GAME": "refgame"}
    env["MAP_RADIUS"] = str(MAP_RADIUS)
    wgctl = Path(sys.executable).parent / "wgctl"
    done = subprocess.run(
        [str(wgctl), "worldgen", "--players", "1", "--seed", "1"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        (village_id,) = db.execute(
            "SELECT v.id FROM villages v JOIN players p ON p.id = v.player_id WHERE p.is_bot"
        ).fetchone()
    return place_next_to(stack, int(village_id), player, 2, MAP_RADIUS)


def _clock_s(text: str) -> int:
    seconds = 0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def test_pan_jump_point_and_send_troops_from_the_map(stack: Stack, sqlite_url: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = new_page(browser, errors, stack.url)
            register_in_page(page, stack.url, "alice")
            register(stack.url, "bob")  # registered right after alice: her neighbour
            alice, bob = player_id(stack, "alice"), player_id(stack, "bob")
            (ax, ay), (bx, by) = spot(stack, alice), spot(stack, bob)
            bot_x, bot_y = _add_bot_beside(stack, sqlite_url, alice)
            centre = page.locator("#map-centre")
            grid = page.locator("#map")
            expect(centre).to_have_text(f"centre ({ax}|{ay})")
            expect(grid.locator("button[data-kind=own]")).to_have_text("★")

            # arrow keys pan while the map has focus (north is up)
            grid.focus()
            for key in ("ArrowRight", "ArrowRight", "ArrowUp"):
                page.keyboard.press(key)
            expect(centre).to_have_text(f"centre ({ax + 2}|{ay + 1})")

            # a drag moves the content with the pointer: two cells right shows the west
            box = grid.bounding_box()
            assert box is not None
            cell = box["width"] / VIEW_CELLS
            start_x, start_y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            page.mouse.move(start_x, start_y)
            page.mouse.down()
            page.mouse.move(start_x + 2 * cell, start_y, steps=8)
            page.mouse.up()
            expect(centre).to_have_text(f"centre ({ax}|{ay + 1})")

            # jump: refused beside the fields unless whole numbers inside the map
            jump_error = page.locator("#map-jump-error")
            page.fill("#map-jump-x", "abc")
            page.fill("#map-jump-y", "1")
            page.get_by_role("button", name="Jump").click()
            expect(jump_error).to_have_text("Give x and y as whole numbers.")
            page.fill("#map-jump-x", str(MAP_RADIUS + 1))
            page.get_by_role("button", name="Jump").click()
            expect(jump_error).to_have_text(f"x and y must be within -{MAP_RADIUS}..{MAP_RADIUS}.")
            expect(centre).to_have_text(f"centre ({ax}|{ay + 1})")
            page.fill("#map-jump-x", str(bx))
            page.fill("#map-jump-y", str(by))
            page.get_by_role("button", name="Jump").click()
            expect(jump_error).to_be_hidden()
            expect(centre).to_have_text(f"centre ({bx}|{by})")

            # pointing at bob's village: owner, population, distance, the troops' travel
            ensure_troops(stack, alice, "legionnaire", 10)
            expect(page.locator("#home-legionnaire")).to_have_text("(10 home)")
            page.fill("#march-legionnaire", "3")
            target = grid.locator(f'button[data-x="{bx}"][data-y="{by}"]')
            expect(target).to_have_attribute("data-kind", "player")
            expect(target).to_have_text("bo")  # not just the first letter
            bot = grid.locator(f'button[data-x="{bot_x}"][data-y="{bot_y}"]')
            expect(bot).to_have_attribute("data-kind", "bot")
            expect(bot).to_have_text("⚙")
            target.hover()
            info = page.locator("#map-info")
            expect(info).to_contain_text("bob's village")
            expect(info).to_contain_text("Owner: bob")
            expect(info).to_contain_text(f"Population: {sum(STARTING_BUILDINGS.values())}")
            distance = math.dist((ax, ay), (bx, by))
            expect(info).to_contain_text(f"Distance: {distance:.1f} fields from alice's village")
            travel = re.search(r"Travel: (\d+:\d\d)", info.inner_text())
            assert travel is not None, info.inner_text()
            expected_ms = march_duration_ms((ax, ay), (bx, by), {"legionnaire": 3}, WORLD_SPEED)
            assert _clock_s(travel.group(1)) == math.ceil(expected_ms / 1000)
            page.screenshot(path=str(ARTIFACTS / "map.png"), full_page=True)

            # a click on the village makes it the target too (the box stays)
            target.click()
            expect(page.locator("#march-x")).to_have_value(str(bx))
            page.fill("#march-x", "")
            page.fill("#march-y", "")

            # "Send troops here" fills the march target and moves to the form
            info.get_by_role("button", name="Send troops here").click()
            expect(page.locator("#march-x")).to_have_value(str(bx))
            expect(page.locator("#march-y")).to_have_value(str(by))
            expect(page.locator("#march-kind")).to_have_value("attack")
            expect(page.locator("#march-troops input").first).to_be_focused()
            page.get_by_role("button", name="Send", exact=True).click()
            expect(page.locator("#marches-out li[data-kind=attack]")).to_contain_text(
                "bob's village"
            )

            # once the client knows the alliance, its members' villages are marked
            members = f"import('/static/app.js').then((app) => app.setAllianceMembers([{bob}]))"
            page.evaluate(members)
            expect(target).to_have_attribute("data-kind", "alliance")
            expect(page.locator(".map-legend")).to_contain_text("alliance")

            # back to the village on screen
            page.get_by_role("button", name="Back to my village").click()
            expect(centre).to_have_text(f"centre ({ax}|{ay})")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
