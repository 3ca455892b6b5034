"""The Marketplace panel in Debian's Chromium: merchants, a preview before sending, the
trade on its way, delivered and home again.

A fresh SQLite world at the README's quick-try speed; alice registers in the page, bob
through the API right after her (his village is beside hers). Screenshot:
``artifacts/browser/trade.png``.
"""

from __future__ import annotations

import math
import re
import sqlite3

import pytest
from playwright.sync_api import expect, sync_playwright

from refgame.trade import trade_duration_ms
from tests.browser.stack import (
    ARTIFACTS,
    WAIT_MS,
    Stack,
    launch_chromium,
    new_page,
    player_id,
    register,
    register_in_page,
    spot,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 50  # a merchant crosses a field in 4.5 s
MAP_RADIUS = 15


def _trade_reports(stack: Stack) -> list[str]:
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        return [b for (b,) in db.execute("SELECT body FROM reports WHERE kind = 'trade'")]


def test_send_resources_from_the_marketplace_panel(stack: Stack) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = new_page(browser, errors, stack.url)
            register_in_page(page, stack.url, "alice")
            register(stack.url, "bob")
            origin = spot(stack, player_id(stack, "alice"))
            target = spot(stack, player_id(stack, "bob"))
            merchants = page.locator("#merchants")
            expect(merchants).to_have_text("Merchants: 1 of 1 free, 500 units each.")

            # too much for one merchant: the preview says so, the server refuses
            page.fill("#trade-wood", "400")
            page.fill("#trade-iron", "200")
            page.fill("#trade-x", str(target[0]))
            page.fill("#trade-y", str(target[1]))
            preview = page.locator("#trade-preview")
            expect(preview).to_contain_text("2 merchants needed (1 free)")
            expect(preview).to_have_class(re.compile(r"\bshort\b"))
            page.get_by_role("button", name="Trade").click()
            expect(page.locator("#trade-error")).to_contain_text("2 merchants needed")

            # one merchant's load: the travel time and arrival before sending
            page.fill("#trade-iron", "0")
            expect(preview).to_contain_text("1 merchant needed (1 free)")
            travel = re.search(r"travel (\d+):(\d\d)", preview.inner_text())
            assert travel is not None
            seconds = int(travel.group(1)) * 60 + int(travel.group(2))
            assert seconds == math.ceil(trade_duration_ms(origin, target, WORLD_SPEED) / 1000)
            expect(preview).to_contain_text(re.compile(r"arrives .* server time, merchants home"))
            page.get_by_role("button", name="Trade").click()
            expect(page.locator("#trade-error")).to_be_hidden()
            trades = page.locator("#trades")
            expect(trades).to_contain_text(re.compile(r"Outgoing → bob's village .*400 wood"))
            expect(merchants).to_have_text("Merchants: 0 of 1 free, 500 units each.")
            page.screenshot(path=str(ARTIFACTS / "trade.png"), full_page=True)

            # delivered (a report for each player), then home again
            expect(trades).to_contain_text("Returning from bob's village")
            assert len(_trade_reports(stack)) == 2
            expect(merchants).to_have_text("Merchants: 1 of 1 free, 500 units each.")
            expect(trades).to_have_text("No merchants on the way.")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
