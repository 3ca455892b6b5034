"""The browser client, played in Debian's Chromium against the real stack.

The web server (``webfront``) and the task server (``gameserver``) run as
subprocesses on a fresh SQLite world and the test Redis, at a high world speed
so builds and marches take seconds. Two players: alice registers in the
browser, bob through the API (then logs in in a second browser context).
The test prepares two things directly in the database: bob's village is moved
three fields from alice's (a short march), and alice gets legionnaires if she
has too few (human players start without troops; their upkeep is not charged,
which does not matter for the test). Everything else goes through the page:
counters move, a build counts down and completes, training, an error message,
the map target, an attack and a recalled raid with countdowns, the incoming
attack on bob's side, the battle reports, conditional polling that stops in a
hidden tab, reload and logout. Screenshots go to ``artifacts/browser/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page, Request, expect, sync_playwright

from tests.browser.stack import (
    ARTIFACTS,
    WAIT_MS,
    Stack,
    ensure_troops,
    launch_chromium,
    log_in,
    new_page,
    place_next_to,
    player_id,
    register,
    register_in_page,
)

pytestmark = pytest.mark.slow

WORLD_SPEED = 200  # a woodcutter upgrade takes ~3 s, a march of 5.7 fields 17 s
MAP_RADIUS = 10
PUSHED_MS = 5_000  # a pushed change shows this soon (the page's polls are minutes apart)


COUNTDOWN = re.compile(r"^\d+:\d\d$")


@dataclass(frozen=True)
class Polled:
    url: str
    headers: dict[str, str]
    status: int

    @classmethod
    def of(cls, request: Request) -> Polled:
        response = request.response()
        return cls(request.url, request.headers, response.status if response else 0)


def set_hidden(page: Page, hidden: bool) -> None:
    """Make the page's document hidden or visible, as a tab switch does."""
    page.evaluate(
        """(hidden) => {
            Object.defineProperty(document, 'hidden', {value: hidden, configurable: true});
            Object.defineProperty(document, 'visibilityState',
                {value: hidden ? 'hidden' : 'visible', configurable: true});
            document.dispatchEvent(new Event('visibilitychange'));
        }""",
        hidden,
    )


def test_two_players_play_in_chromium(stack: Stack) -> None:
    bob = register(stack.url, "bob")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            play(browser, stack, bob, errors)
        finally:
            browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"


def play(browser: Browser, stack: Stack, bob: dict[str, int], errors: list[str]) -> None:
    page = new_page(browser, errors, stack.url)
    polls: list[Polled] = []
    page.on(
        "requestfinished",
        lambda r: polls.append(Polled.of(r)) if r.url.endswith("/api/snapshot") else None,
    )
    answer = page.goto(stack.url)
    assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]

    # register in the page
    register_in_page(page, stack.url, "alice")
    expect(page.locator("#player-name")).to_have_text("alice")

    # the counters move between polls, below their caps
    wood = page.locator("#res-wood")
    start = int(wood.inner_text())
    expect(wood).not_to_have_text(str(start))
    assert int(wood.inner_text()) > start
    expect(page.locator(".res[data-res=wood] .cap")).to_have_text(re.compile(r"^ / \d+$"))
    expect(page.locator(".res[data-res=crop] .rate")).to_have_text(re.compile(r"^[+-]\d+/h$"))

    # build: a countdown in the queue, then the level goes up
    field = page.locator("#buildings tr[data-kind=woodcutter]")
    level = int(field.locator(".level").inner_text())
    field.get_by_role("button", name=f"Upgrade Woodcutter to level {level + 1}").click()
    order = page.locator("#build-queue li[data-kind=woodcutter]")
    expect(order).to_contain_text(f"level {level + 1}")
    expect(order.locator(".countdown")).to_have_text(COUNTDOWN)
    expect(field.locator(".level")).to_have_text(str(level + 1))
    expect(order).to_have_count(0)

    # an error of the API is shown with its message; a good order gets a countdown
    page.select_option("#train-unit", "legionnaire")
    page.fill("#train-count", "10000")
    page.locator("#train-form").get_by_role("button", name="Train").click()
    expect(page.locator("#train-count-error")).to_contain_text("not enough resources")
    page.fill("#train-count", "1")
    page.locator("#train-form").get_by_role("button", name="Train").click()
    expect(page.locator("#message.ok")).to_contain_text("Training 1")
    expect(page.locator("#train-count-error")).to_be_hidden()  # the next action clears it
    expect(page.locator("#training-queue li .countdown")).to_have_text(COUNTDOWN)

    # prepare the fight in the database: bob 5.7 fields away (the attack is still on its
    # way when bob logs in, even on a slow machine), alice with legionnaires
    alice_id = player_id(stack, "alice")
    ensure_troops(stack, alice_id, "legionnaire", 10)
    bx, by = place_next_to(stack, bob["village_id"], alice_id, 4, MAP_RADIUS)
    expect(page.locator("#home-legionnaire")).to_have_text(re.compile(r"^\(\d{2,} home\)$"))

    # bob logs in in a second browser context: his page holds the event stream ("live"),
    # so after its first polls it only polls every few minutes
    bob_page = new_page(browser, errors, stack.url)
    log_in(bob_page, stack.url, "bob")
    expect(bob_page.locator("#village-title")).to_contain_text(f"({bx}|{by})")
    expect(bob_page.locator("#live")).to_be_visible()
    app = "import('/static/app.js').then((app) => "
    assert bob_page.evaluate(f"{app}app.poller.delayMs())") == 120_000  # the safety interval
    bob_polls: list[Polled] = []
    bob_page.on(
        "requestfinished",
        lambda r: bob_polls.append(Polled.of(r)) if r.url.endswith("/api/snapshot") else None,
    )
    expect(bob_page.locator("#alert-banner")).to_be_hidden()

    # a click on bob's village in the map fills the target; attack with 5 legionnaires
    page.get_by_role("button", name="Refresh map").click()
    page.locator(f'#map button[data-x="{bx}"][data-y="{by}"]').click()
    expect(page.locator("#march-x")).to_have_value(str(bx))
    expect(page.locator("#march-y")).to_have_value(str(by))
    expect(page.locator("#march-kind")).to_have_value("attack")
    page.fill("#march-legionnaire", "5")
    page.get_by_role("button", name="Send", exact=True).click()
    attack = page.locator("#marches-out li[data-kind=attack]")
    expect(attack).to_contain_text("bob's village")
    # pushed to bob: the banner, and his snapshot fetched at once (not at a poll interval)
    banner = bob_page.locator("#alert-banner")
    expect(banner).to_be_visible(timeout=PUSHED_MS)
    warning = re.compile(r"Incoming attack on bob's village from \(-?\d+\|-?\d+\)")
    expect(banner).to_contain_text(warning)
    incoming = bob_page.locator("#marches-in li.hostile[data-kind=attack]")
    expect(incoming).to_contain_text("alice's village", timeout=PUSHED_MS)
    assert bob_polls, "bob's page did not fetch its snapshot"
    expect(attack.locator(".countdown")).to_have_text(COUNTDOWN)

    # ids are 64-bit: the page reads and writes them digit for digit (a JS number would
    # round 385675733570707457 to ...456 and a recall would name another march)
    big = "385675733570707457"
    sdk = "import('/sdk/webgame.js').then(({ parseJson, toJson }) => "
    assert page.evaluate(f"{sdk}String(parseJson('{{\"march_id\": {big}}}').march_id))") == big
    assert (
        page.evaluate(f"{sdk}toJson(parseJson('{{\"march_id\": {big}}}')))")
        == f'{{"march_id":{big}}}'
    )

    # a raid, recalled on its way: the troops come home (the recall names a 64-bit march id)
    expect(page.locator("#training-queue .countdown")).to_have_count(0)  # none comes home later
    home = page.locator("#home-legionnaire")
    at_home = int(re.sub(r"\D", "", home.inner_text()))
    page.select_option("#march-kind", "raid")
    page.fill("#march-legionnaire", "2")
    page.get_by_role("button", name="Send", exact=True).click()
    raid = page.locator("#marches-out li[data-kind=raid]")
    expect(raid.locator(".countdown")).to_have_text(COUNTDOWN)
    expect(home).to_have_text(f"({at_home - 2} home)")
    page.wait_for_timeout(2000)  # on the way for 2 s (of 17), so the way back takes 2 s too
    raid.get_by_role("button", name="Recall the raid march").click()
    expect(page.locator("#message.ok")).to_contain_text("turn back")
    expect(raid).to_have_count(0)
    back = page.locator("#marches-in li[data-kind=return]")
    expect(back).to_contain_text("from bob's village")
    expect(back.locator(".countdown")).to_have_text(COUNTDOWN)
    expect(back).to_have_count(0)
    expect(home).to_have_text(f"({at_home} home)")

    page.screenshot(path=str(ARTIFACTS / "alice-marching.png"), full_page=True)
    bob_page.screenshot(path=str(ARTIFACTS / "bob-incoming.png"), full_page=True)

    # after the arrival both get a battle report, unread first; alice opens hers
    report = page.locator("#reports li.unread", has_text="Attack")
    expect(report).to_have_count(1)
    expect(page.locator("#unread")).to_have_text("1 new")
    expect(attack).to_have_count(0)
    report.get_by_role("button").click()
    detail = page.locator("#report-detail")
    expect(detail).to_contain_text("attacked bob's village")
    expect(detail.locator("table")).to_contain_text("Legionnaire")
    expect(page.locator("#reports li.unread")).to_have_count(0)
    expect(page.locator("#unread")).to_be_hidden()
    expect(bob_page.locator("#reports li.unread")).to_contain_text("Attack")

    page.screenshot(path=str(ARTIFACTS / "alice.png"), full_page=True)
    bob_page.screenshot(path=str(ARTIFACTS / "bob.png"), full_page=True)

    # polling: conditional requests answered 304; none while the tab is hidden; clock
    # resync and a poll as soon as it shows again
    assert any(r.headers.get("if-none-match") for r in polls), "no poll sent If-None-Match"
    assert 304 in [r.status for r in polls if r.headers.get("if-none-match")]
    polls.clear()
    set_hidden(page, True)
    # what a command or a countdown at zero does (the page's module is loaded once per URL)
    page.evaluate("import('/static/app.js').then((app) => app.pollSoon(0))")
    page.wait_for_timeout(1500)
    assert [r.url for r in polls] == [], "the hidden tab polled"
    with page.expect_request("**/api/time"), page.expect_request("**/api/snapshot"):
        set_hidden(page, False)

    # a reload keeps the session (an HttpOnly cookie); logging out ends it
    page.reload()
    expect(page.locator("#village-title")).to_contain_text("alice's village")
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    page.reload()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    expect(page.locator("#game")).to_be_hidden()
