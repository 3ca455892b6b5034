"""A second village in Debian's Chromium: a click on an empty map field aims the found form,
which shows the travel time; the settlers on their way; and the village selector switching
the whole view.

webfront and gameserver run as subprocesses on a fresh SQLite world; alice registers
through the API and gets three settlers in the database (training them takes hours).
Screenshot: ``artifacts/browser/settle.png``.
"""

from __future__ import annotations

import sqlite3

import pytest
from playwright.sync_api import expect, sync_playwright

from refgame.world import player_village_template
from tests.browser.stack import (
    ARTIFACTS,
    WAIT_MS,
    Stack,
    ensure_troops,
    launch_chromium,
    log_in,
    new_page,
    register,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 200  # settlers walk 1,000 fields an hour: a field next door in 3.6 s
MAP_RADIUS = 10


def _free_field_beside(stack: Stack, village_id: int) -> tuple[int, int]:
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        x, y = db.execute("SELECT x, y FROM villages WHERE id = ?", (village_id,)).fetchone()
        taken = set(db.execute("SELECT x, y FROM villages").fetchall())
    for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, -1)):
        if (x + dx, y + dy) not in taken and max(abs(x + dx), abs(y + dy)) <= MAP_RADIUS:
            return x + dx, y + dy
    raise AssertionError("no free field beside the village")


def _village_at(stack: Stack, x: int, y: int) -> int | None:
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        row = db.execute("SELECT id FROM villages WHERE x = ? AND y = ?", (x, y)).fetchone()
    return None if row is None else int(row[0])


def test_found_a_village_and_switch_between_the_two(stack: Stack) -> None:
    alice = register(stack.url, "alice")
    ensure_troops(stack, alice["player_id"], "settler", 3)
    x, y = _free_field_beside(stack, alice["village_id"])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = new_page(browser, errors, stack.url)
            log_in(page, stack.url, "alice")
            expect(page.locator("#found-home")).to_contain_text("3 of 3 settlers at home")
            home_title = page.locator("#village-title").inner_text()

            # the travel time before sending: one field at 5 × 200 fields an hour
            # an empty field, once the map's window is fetched (an unknown field aims nowhere)
            page.locator(f"#map .cell:not(.unknown)[title='({x}|{y})']").click()
            expect(page.locator("#found-x")).to_have_value(str(x))
            expect(page.locator("#found-y")).to_have_value(str(y))
            expect(page.locator("#found-preview")).to_contain_text("1.0 fields: travel 0:04")
            page.locator("#found-send").click()
            expect(page.locator("#settlers-out")).to_contain_text(f"3 settlers → ({x}|{y})")
            expect(page.locator("#found-home")).to_contain_text("0 of 3 settlers at home")

            # founded: the selector appears and switches everything to the new village
            select = page.locator("#village-select")
            expect(select).to_be_visible()
            new_id = _village_at(stack, x, y)
            assert new_id is not None
            select.select_option(str(new_id))
            expect(page.locator("#village-title")).to_contain_text(f"({x}|{y})")
            wood = player_village_template(WORLD_SPEED).rates["wood"]
            expect(page.locator("#resources [data-res='wood'] .rate")).to_have_text(f"+{wood}/h")
            expect(page.locator("#troops")).to_contain_text("No troops at home.")
            expect(page.locator("#build-queue")).to_contain_text("Nothing is being built.")
            expect(page.locator("#settlers-out")).to_contain_text("No settlers on the way.")
            here = page.locator("#map .cell.here")
            expect(here).to_have_attribute("data-x", str(x))
            expect(here).to_have_attribute("data-y", str(y))
            # a build from here is the new village's
            page.locator("#buildings tr[data-kind='woodcutter'] button").click()
            expect(page.locator("#build-queue")).to_contain_text("Woodcutter → level 3")
            page.screenshot(path=str(ARTIFACTS / "settle.png"), full_page=True)

            select.select_option(str(alice["village_id"]))
            expect(page.locator("#village-title")).to_have_text(home_title)
            expect(page.locator("#build-queue")).to_contain_text("Nothing is being built.")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
