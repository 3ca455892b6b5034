"""Know before you click, in Debian's Chromium: costs, times and what is missing.

The README's quick-try world (``WORLD_SPEED=50 MAP_RADIUS=15``) runs as subprocesses
(webfront and gameserver) on a fresh SQLite world. alice registers in the page, bob
through the API just after her, so the placement puts him beside her. The page shows
each building's next-level cost and duration, a unit's cost, time, upkeep and stats
and what a too-big order lacks, and a march's travel time and arrival before it is
sent; errors show next to their field and clear on the next action. The test gives
alice ten legionnaires in the database (human players start without troops).
Screenshot: ``artifacts/browser/know-before.png``.
"""

from __future__ import annotations

import math
import re

import pytest
from playwright.sync_api import expect, sync_playwright

from refgame.buildings import build_cost
from refgame.travel import march_duration_ms
from tests.browser.stack import (
    ARTIFACTS,
    WAIT_MS,
    Stack,
    ensure_troops,
    launch_chromium,
    new_page,
    player_id,
    register,
    register_in_page,
    spot,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 50  # the README's quick try
MAP_RADIUS = 15


def _clock_s(text: str) -> int:
    """Seconds of an ``m:ss`` or ``h:mm:ss`` duration."""
    seconds = 0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def test_costs_times_and_what_is_missing_before_a_click(stack: Stack) -> None:
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
            origin, target = spot(stack, alice), spot(stack, bob)
            assert math.dist(origin, target) <= 2

            # the build button's row shows the next level's cost and duration
            field = page.locator("#buildings tr[data-kind=woodcutter]")
            level = int(field.locator(".level").inner_text())
            cost = build_cost("woodcutter", level + 1).as_dict()
            listed = ", ".join(f"{n} {r}" for r, n in cost.items() if n)
            expect(field.locator(".cost")).to_have_text(re.compile(rf"^{listed} · \d+:\d\d$"))

            # a unit's cost, time, upkeep and stats; too many say what is missing and when
            page.select_option("#train-unit", "legionnaire")
            page.fill("#train-count", "7")  # 840 wood, 1050 iron: more than the 750 at start
            info = page.locator("#train-info")
            expect(info).to_contain_text("One: 120 wood, 100 clay, 150 iron, 30 crop, upkeep 1")
            expect(info).to_contain_text("Attack 40")
            expect(info).to_contain_text(
                re.compile(r"7 cost 840 wood, 700 clay, 1050 iron, 210 crop and take \d+:\d\d")
            )
            note = page.locator("#train-note")
            expect(note).to_contain_text(
                re.compile(r"^Missing \d+ wood, \d+ iron; enough in \d+:\d\d")
            )
            page.locator("#train-form").get_by_role("button", name="Train").click()
            refusal = page.locator("#train-count-error")
            expect(refusal).to_contain_text(
                re.compile(r"not enough resources: \d+ wood, \d+ iron missing")
            )
            expect(page.locator("#message")).to_be_hidden()

            # the march form shows the travel time and arrival before sending
            ensure_troops(stack, alice, "legionnaire", 10)
            expect(page.locator("#home-legionnaire")).to_have_text("(10 home)")
            page.fill("#march-x", str(target[0]))
            page.fill("#march-y", str(target[1]))
            page.select_option("#march-kind", "raid")
            page.fill("#march-legionnaire", "3")
            preview = page.locator("#march-preview")
            expect(preview).to_contain_text("arrives")
            travel = re.search(r"travel (\d+:\d\d)", preview.inner_text())
            assert travel is not None
            expected_ms = march_duration_ms(origin, target, {"legionnaire": 3}, WORLD_SPEED)
            assert _clock_s(travel.group(1)) == math.ceil(expected_ms / 1000)
            expect(preview).to_contain_text(
                re.compile(r"arrives \d+:\d\d:\d\d( [AP]M)? server time, home again at")
            )

            # more troops than are home: said next to the field, nothing sent; the next
            # action clears the old errors
            page.fill("#march-legionnaire", "30")
            page.get_by_role("button", name="Send", exact=True).click()
            expect(page.locator("#march-legionnaire-error")).to_have_text("Only 10 at home.")
            expect(refusal).to_be_hidden()
            page.screenshot(path=str(ARTIFACTS / "know-before.png"), full_page=True)
            page.fill("#march-legionnaire", "3")
            page.get_by_role("button", name="Send", exact=True).click()
            expect(page.locator("#march-legionnaire-error")).to_be_hidden()
            expect(page.locator("#marches-out li[data-kind=raid]")).to_contain_text("bob's village")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
