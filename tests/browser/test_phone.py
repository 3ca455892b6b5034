"""The reference game's page on a phone (390 × 844) in Debian's Chromium: one column, no
sideways scrolling, tap-sized buttons, icons beside names, and an incoming attack the
defender cannot miss.

bob plays in the page; alice, registered through the API just after him (so she is
his neighbour), attacks him through the API. The pushed alert shows the banner with a
countdown to the arrival (and in the tab's title); a reload shows it again from the
snapshot alone; it goes at the arrival. A second march (a raid) shows it again and the
close button dismisses it. The world runs fast (``WORLD_SPEED=50``): the march takes
seconds. Screenshots: ``artifacts/browser/phone.png`` and ``phone-incoming.png``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import urllib.request
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect, sync_playwright

from refgame.buildings import BUILDINGS
from refgame.resources import RESOURCES
from tests.browser.stack import (
    ARTIFACTS,
    WAIT_MS,
    Stack,
    enforce_csp,
    ensure_troops,
    launch_chromium,
    player_id,
    register,
    register_in_page,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 50
MAP_RADIUS = 15
PHONE: ViewportSize = {"width": 390, "height": 844}
TAP_PX = 44  # the smallest button a thumb hits reliably
COUNTDOWN = re.compile(r"^\d+:\d\d$")


def _village(stack: Stack, player: int) -> tuple[int, int, int]:
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        vid, x, y = db.execute(
            "SELECT id, x, y FROM villages WHERE player_id = ?", (player,)
        ).fetchone()
    return int(vid), int(x), int(y)


def _march(stack: Stack, token: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{stack.url}/api/march",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        result: dict[str, Any] = json.loads(answer.read())
    return result


def _overflow_px(page: Page) -> int:
    """How far the page is wider than the screen (0: no sideways scrolling)."""
    return int(
        page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    )


def _small_buttons(page: Page) -> list[str]:
    """Visible buttons (not map cells or text links) shorter than a thumb."""
    found: list[str] = page.evaluate(
        """(min) => [...document.querySelectorAll('button:not(.cell):not(.link)')]
            .filter((b) => b.offsetParent !== null && b.getBoundingClientRect().height < min)
            .map((b) => b.id || b.textContent.trim())""",
        TAP_PX,
    )
    return found


def test_a_phone_sized_page_and_an_incoming_attack_it_cannot_miss(stack: Stack) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            enforce_csp(page, f"{stack.url}/", errors)
            register_in_page(page, stack.url, "bob")
            alice_token = str(register(stack.url, "alice")["token"])
            alice, bob = player_id(stack, "alice"), player_id(stack, "bob")
            origin, (_, bx, by) = _village(stack, alice), _village(stack, bob)

            # one column, nothing wider than the screen, buttons a thumb can hit
            expect(page.locator("#rankings-me")).not_to_be_empty()
            assert _overflow_px(page) == 0
            assert _small_buttons(page) == []
            boxes = [page.locator(f"#h-{h}").bounding_box() for h in ("buildings", "troops")]
            assert all(boxes) and boxes[0]["x"] == boxes[1]["x"]  # type: ignore[index]

            # icons beside the names: every resource and building, drawn and loaded
            icons = page.locator("#resources img.icon")
            expect(icons).to_have_count(len(RESOURCES))
            expect(page.locator("#buildings th img.icon")).to_have_count(len(BUILDINGS))
            loaded = "(imgs) => imgs.every((i) => i.complete && i.naturalWidth > 0)"
            page.wait_for_function(
                f"({loaded})([...document.querySelectorAll('img.icon, img.alert-icon')])"
            )
            page.screenshot(path=str(ARTIFACTS / "phone.png"), full_page=True)

            # alice attacks: the pushed alert shows the banner with a countdown, and the title
            banner = page.locator("#alert-banner")
            expect(banner).to_be_hidden()
            ensure_troops(stack, alice, "legionnaire", 10)
            attack = {"village_id": origin[0], "x": bx, "y": by, "troops": {"legionnaire": 5}}
            _march(stack, alice_token, {**attack, "kind": "attack"})
            expect(banner).to_be_visible()
            expect(banner).to_contain_text(
                re.compile(r"Incoming attack on bob's village from \(-?\d+\|-?\d+\)")
            )
            countdown = page.locator("#alert-countdown")
            expect(countdown).to_have_text(COUNTDOWN)
            expect(page).to_have_title(re.compile(r"^⚠ \d+:\d\d Attack! – "))
            assert _overflow_px(page) == 0
            page.screenshot(path=str(ARTIFACTS / "phone-incoming.png"), full_page=True)

            # the snapshot alone carries it: a reload shows the banner again
            page.reload()
            expect(page.locator("#village-title")).to_contain_text("bob's village")
            expect(banner).to_be_visible()
            expect(countdown).to_have_text(COUNTDOWN)
            # ... until the attack arrives
            expect(banner).to_be_hidden()
            expect(page).to_have_title("Webgame")

            # a raid shows it again; the close button dismisses it
            _march(stack, alice_token, {**attack, "kind": "raid", "troops": {"legionnaire": 1}})
            expect(banner).to_contain_text("Incoming raid on bob's village")
            expect(countdown).to_have_text(COUNTDOWN)
            page.get_by_role("button", name="Dismiss alert").click()
            expect(banner).to_be_hidden()
            expect(page).to_have_title("Webgame")
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
