"""Three players in Debian's Chromium, one browser context each (issue 17).

alice, bob and carol register in the page one after another, so the placement puts
each beside the last. alice founds an alliance and invites bob, who accepts in his page;
his map then marks her village as the alliance's. alice sends bob wood from the
Marketplace panel and his page shows the delivery (a report, his stock up by what was
sent). bob founds a second village from the page and the village selector lists both.
Then the alliance raids carol: alice from the map's "Send troops here", bob from the
march form; carol's page shows the incoming-raid banner and all three get their battle
reports.

webfront and gameserver run as subprocesses on a fresh SQLite world, at twice the
README's quick-try speed so the raid across up to four fields stays short. The test
gives bob three settlers and alice and bob five legionnaires each in the database
(training them takes hours). Screenshots: ``artifacts/browser/three-players-*.png``.
"""

from __future__ import annotations

import math
import re
import sqlite3
import time

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from db.worldgen import NEIGHBOUR_FIELDS
from tests.browser.stack import (
    ARTIFACTS,
    WAIT_MS,
    Stack,
    ensure_troops,
    launch_chromium,
    new_page,
    player_id,
    register_in_page,
    spot,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 100  # legionnaires cross a field in 6 s, merchants in 2.25 s, settlers in 7.2 s
MAP_RADIUS = 15
SENT_WOOD = 200  # fits under bob's warehouse cap (1200) with room to spare
RAIDERS = 5  # legionnaires each of alice and bob sends


def _free_field_beside(stack: Stack, spot: tuple[int, int]) -> tuple[int, int]:
    """A free field one step from ``spot`` along an axis (the shortest settler walk)."""
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        taken = set(db.execute("SELECT x, y FROM villages").fetchall())
    x, y = spot
    for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1)):
        if (x + dx, y + dy) not in taken and max(abs(x + dx), abs(y + dy)) <= MAP_RADIUS:
            return x + dx, y + dy
    raise AssertionError(f"no free field beside ({x}|{y})")


def _wood(page: Page) -> int:
    return int(page.locator("#res-wood").inner_text())


def _shoot(page: Page, step: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"three-players-{step}.png"), full_page=True)


def test_three_neighbours_ally_trade_settle_and_raid(stack: Stack) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            # three contexts: each player has a session of their own
            alice, bob, carol = (new_page(browser, errors, stack.url) for _ in range(3))
            for page, name in ((alice, "alice"), (bob, "bob"), (carol, "carol")):
                register_in_page(page, stack.url, name)
            ids = {name: player_id(stack, name) for name in ("alice", "bob", "carol")}
            a, b, c = (spot(stack, ids[name]) for name in ("alice", "bob", "carol"))
            assert math.dist(a, b) <= NEIGHBOUR_FIELDS  # each beside the last registered
            assert math.dist(b, c) <= NEIGHBOUR_FIELDS
            assert math.dist(a, c) <= 2 * NEIGHBOUR_FIELDS
            _shoot(carol, "registered")

            # the alliance: alice founds it and invites bob, bob accepts in his page
            alice.get_by_label("Alliance name").fill("Night Owls")
            alice.get_by_label("Tag").fill("OWL")
            alice.locator("#alliance-create").get_by_role("button", name="Found").click()
            expect(alice.locator("#alliance-title")).to_have_text("[OWL] Night Owls")
            alice.locator("#alliance-invitee").fill("bob")
            alice.locator("#alliance-invite").get_by_role("button", name="Invite").click()
            expect(alice.locator("#alliance-sent")).to_contain_text("bob")
            invitation = bob.locator("#alliance-invitations li", has_text="[OWL] Night Owls")
            invitation.get_by_role("button", name="Accept").click()
            expect(bob.locator("#alliance-title")).to_have_text("[OWL] Night Owls")
            expect(alice.locator("#alliance-members li")).to_have_count(2)
            allied = bob.locator(f'#map button[data-x="{a[0]}"][data-y="{a[1]}"]')
            expect(allied).to_have_attribute("data-kind", "alliance")
            stranger = bob.locator(f'#map button[data-x="{c[0]}"][data-y="{c[1]}"]')
            bob.get_by_role("button", name="Refresh map").click()  # carol came after bob
            expect(stranger).to_have_attribute("data-kind", "player")
            _shoot(bob, "alliance")

            # trade: alice sends bob wood; his page shows the delivery
            expect(alice.locator("#merchants")).to_have_text(
                "Merchants: 1 of 1 free, 500 units each."
            )
            alice.fill("#trade-wood", str(SENT_WOOD))
            alice.fill("#trade-x", str(b[0]))
            alice.fill("#trade-y", str(b[1]))
            expect(alice.locator("#trade-preview")).to_contain_text("1 merchant needed (1 free)")
            rate = bob.locator(".res[data-res=wood] .rate").inner_text()
            per_hour = int(re.sub(r"\D", "", rate))
            before, sent_at = _wood(bob), time.monotonic()
            alice.get_by_role("button", name="Trade").click()
            expect(alice.locator("#trades")).to_contain_text(
                re.compile(rf"Outgoing → bob's village .*{SENT_WOOD} wood")
            )
            expect(bob.locator("#reports li", has_text="Resources delivered")).to_have_count(1)
            bob.wait_for_function(
                "(least) => Number(document.querySelector('#res-wood').textContent) >= least",
                arg=before + SENT_WOOD,
            )
            gained, elapsed_s = _wood(bob) - before, time.monotonic() - sent_at
            produced = per_hour * elapsed_s / 3600
            assert SENT_WOOD <= gained <= SENT_WOOD + produced + 2, (gained, produced)
            _shoot(bob, "trade")

            # bob founds a second village from the page; the selector lists both
            ensure_troops(stack, ids["bob"], "settler", 3)
            ensure_troops(stack, ids["bob"], "legionnaire", RAIDERS)
            ensure_troops(stack, ids["alice"], "legionnaire", RAIDERS)
            expect(bob.locator("#found-home")).to_contain_text("3 of 3 settlers at home")
            field = _free_field_beside(stack, b)
            bob.locator(f"#map .cell:not(.unknown)[title='({field[0]}|{field[1]})']").click()
            expect(bob.locator("#found-x")).to_have_value(str(field[0]))
            expect(bob.locator("#found-y")).to_have_value(str(field[1]))
            bob.locator("#found-send").click()
            expect(bob.locator("#settlers-out")).to_contain_text(f"3 settlers → ({field[0]}|")
            select = bob.locator("#village-select")
            expect(select).to_be_visible()
            expect(select.locator("option")).to_have_count(2)
            expect(bob.locator("#village-title")).to_contain_text(f"({b[0]}|{b[1]})")
            _shoot(bob, "settled")

            # the alliance raids carol: bob from the march form, alice from the map; both
            # forms are ready first so the two raids are on their way together
            banner = carol.locator("#alert-banner")
            expect(banner).to_be_hidden()
            expect(bob.locator("#home-legionnaire")).to_have_text(f"({RAIDERS} home)")
            bob.fill("#march-x", str(c[0]))
            bob.fill("#march-y", str(c[1]))
            bob.select_option("#march-kind", "raid")
            bob.fill("#march-legionnaire", str(RAIDERS))
            expect(bob.locator("#march-preview")).to_contain_text("arrives")
            alice.get_by_role("button", name="Refresh map").click()
            expect(alice.locator("#home-legionnaire")).to_have_text(f"({RAIDERS} home)")
            alice.locator(f'#map button[data-x="{c[0]}"][data-y="{c[1]}"]').hover()
            info = alice.locator("#map-info")
            expect(info).to_contain_text("Owner: carol")
            info.get_by_role("button", name="Send troops here").click()
            expect(alice.locator("#march-x")).to_have_value(str(c[0]))
            expect(alice.locator("#march-y")).to_have_value(str(c[1]))
            alice.select_option("#march-kind", "raid")
            alice.fill("#march-legionnaire", str(RAIDERS))
            alice.get_by_role("button", name="Send", exact=True).click()
            bob.get_by_role("button", name="Send", exact=True).click()
            for page in (alice, bob):
                raid = page.locator("#marches-out li[data-kind=raid]")
                expect(raid).to_contain_text("carol's village")
            expect(banner).to_contain_text("Incoming raid on carol's village")
            hostile = carol.locator("#marches-in li.hostile[data-kind=raid]")
            expect(hostile.first).to_contain_text(re.compile(r"from (alice|bob)'s village"))
            _shoot(carol, "incoming")

            # both raids arrive: a report for each raider, two for carol
            expect(alice.locator("#reports li", has_text="Raid won")).to_have_count(1)
            expect(bob.locator("#reports li", has_text="Raid won")).to_have_count(1)
            expect(carol.locator("#reports li", has_text="Raid suffered")).to_have_count(2)
            expect(banner).to_be_hidden()
            for page, name in ((alice, "alice"), (bob, "bob"), (carol, "carol")):
                _shoot(page, f"reports-{name}")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
