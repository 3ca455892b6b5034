"""The browser SDK (``/sdk/webgame.js``) and the generic page, in Debian's Chromium.

One web tier runs the test game ``tests.web.minigame``, which has no browser
client of its own, so ``/`` is the framework's generic page. The SDK's cases
(``sdk_page/cases.js``) run on a test page that the browser is handed on the web
tier's origin (so cookies and the CSRF rule work as for a real client) and talk
to the real server: clock sync, ETag polling with 304 and back-off, the pause
of a hidden tab, idempotency keys across a lost answer, and the error shape.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect, sync_playwright
from redis import Redis

from common.snapshot_versions import push_channel, version_key
from tests.browser.stack import REPO, Stack, enforce_csp, launch_chromium, run_stack
from tests.conftest import TEST_REDIS_URL

pytestmark = pytest.mark.slow

ARTIFACTS = REPO / "artifacts" / "browser"
SDK_PAGE = Path(__file__).with_name("sdk_page")
TEST_PAGE_PATH = "/sdk-test/"  # served by the browser from SDK_PAGE, never by the server
MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript"}
WAIT_MS = 30_000  # the bound of every wait for the page
PASSWORD = "generic test password"
POLL_MIN_MS = 40  # the poller's back-off in these tests: 40, 40, 80, 160, 200, 200 ms
POLL_MAX_MS = 200
CATCH_UP_TRIES = 4  # the SDK's defaults: polls after a push whose version has not come yet,
CATCH_UP_MS = 250  # 250, 500, 750, 1000 ms after the last


@pytest.fixture(scope="module")
def stack(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One web tier (no task server: no test here needs an event to run) for the module."""
    folder = tmp_path_factory.mktemp("sdk")
    shutil.copy(sqlite_template, folder / "world.db")
    with run_stack(
        f"sqlite+aiosqlite:///{folder / 'world.db'}",
        f"wgt{uuid.uuid4().hex[:10]}",
        folder,
        game="tests.web.minigame",
        processes=("webfront",),
    ) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = launch_chromium(pw)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (no cookies); fails the test on any JavaScript error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"


def open_test_page(page: Page, stack: Stack) -> None:
    def serve(route: Route) -> None:
        name = route.request.url.split(TEST_PAGE_PATH, 1)[1].split("?")[0] or "index.html"
        path = SDK_PAGE / name
        if path.parent != SDK_PAGE or not path.is_file():
            route.fulfill(status=404, body="")
            return
        route.fulfill(path=path, content_type=MEDIA_TYPES[path.suffix])

    page.route(f"{stack.url}{TEST_PAGE_PATH}**", serve)
    page.goto(f"{stack.url}{TEST_PAGE_PATH}")
    page.wait_for_function("window.cases !== undefined")


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


def test_clock_sync_takes_the_midpoint_of_the_fastest_round_trip(page: Page, stack: Stack) -> None:
    open_test_page(page, stack)
    skew_ms = 3_600_000
    result = page.evaluate("(skew) => cases.clockSync(skew)", skew_ms)
    assert result["ok"] and result["shared"]
    assert result["timeCalls"] == 4  # one round of samples for both callers
    # the server and the page share this machine's clock: the true offset is the skew,
    # and the estimate is off by at most half the round trip (plus whole-ms stamps)
    assert abs(result["offsetMs"] - skew_ms) <= result["rttMs"] / 2 + 1
    assert result["scriptedRttMs"] == 100
    assert result["scriptedOffsetMs"] == result["secondStamp"] - 1050
    assert result["downOk"] is False and result["downOffsetMs"] == 1234

    # a tab that shows again resyncs its clock
    page.evaluate("cases.idleGame()")
    set_hidden(page, True)
    with page.expect_request("**/api/time"):
        set_hidden(page, False)


def test_polling_uses_etags_backs_off_and_pauses_while_hidden(page: Page, stack: Stack) -> None:
    open_test_page(page, stack)
    finished: list[tuple[str | None, int]] = []  # (If-None-Match, status) of each poll

    def on_finished(request: Request) -> None:
        response = request.response()
        if request.url.endswith("/api/snapshot") and response is not None:
            finished.append((request.headers.get("if-none-match"), response.status))

    page.on("requestfinished", on_finished)
    page.evaluate(
        "([name, lo, hi]) => cases.startPolling(name, lo, hi)", ["poller", POLL_MIN_MS, POLL_MAX_MS]
    )
    page.wait_for_function("polling.polls.filter((p) => 'delayMs' in p).length >= 6")
    polls = [p for p in page.evaluate("polling.polls") if "delayMs" in p][:6]
    assert [(p["status"], p["changed"]) for p in polls] == [(200, True)] + [(304, False)] * 5
    # a change restarts at the minimum; unchanged polls double it up to the maximum
    assert [p["delayMs"] for p in polls] == [40, 40, 80, 160, 200, 200]
    calls = page.evaluate("polling.calls.filter((c) => c.url.endsWith('/api/snapshot'))")[:6]
    gaps = [b["at"] - a["at"] for a, b in pairwise(calls)]
    assert all(gap >= delay - 2 for gap, delay in zip(gaps, [40, 40, 80, 160, 200], strict=True))
    # on the wire: the first poll without If-None-Match, then the ETag it got, answered 304
    assert finished[0] == (None, 200)
    conditional = finished[1:5]
    assert len({h for h, _ in conditional}) == 1 and all(s == 304 for _, s in conditional)

    # a command makes the poller fetch now: the new snapshot, back-off from the minimum
    before = page.evaluate("polling.polls.length")
    page.evaluate("cases.pollingCommand()")
    page.wait_for_function(
        "(n) => polling.polls.slice(n).some((p) => p.changed === true)", arg=before
    )
    after = [p for p in page.evaluate("polling.polls")[before:] if "delayMs" in p]
    changed = next(p for p in after if p["changed"])
    assert changed["status"] == 200 and changed["delayMs"] == POLL_MIN_MS

    # hidden: nothing is scheduled, also when asked to poll now; visible again: the
    # clock is resynced and the snapshot polled at once
    set_hidden(page, True)
    page.evaluate("polling.poller.soon(0)")
    assert page.evaluate("polling.poller.scheduled") is False
    count = page.evaluate("polling.calls.length")
    page.wait_for_timeout(3 * POLL_MAX_MS)  # several maximal intervals: no poll may come
    assert page.evaluate("polling.calls.length") == count, "the hidden tab polled"
    with page.expect_request("**/api/time"), page.expect_request("**/api/snapshot"):
        set_hidden(page, False)
    page.evaluate("polling.poller.stop()")


def test_a_retry_after_a_lost_answer_reuses_the_idempotency_key(page: Page, stack: Stack) -> None:
    open_test_page(page, stack)
    seen: list[dict[str, Any]] = []

    def lose_the_first_answer(route: Route) -> None:
        answer = route.fetch()  # the server runs the command and answers ...
        seen.append(
            {
                "key": route.request.headers["idempotency-key"],
                "status": answer.status,
                "replayed": answer.headers.get("idempotent-replayed"),
                "body": answer.json(),
            }
        )
        if len(seen) == 1:
            route.abort("connectionreset")  # ... and the answer is lost on its way back
        else:
            route.fulfill(response=answer)

    page.route("**/api/test/spend", lose_the_first_answer)
    result = page.evaluate("cases.idempotency('idem')")
    assert len(seen) == 3
    lost, retry, other = seen
    assert lost["key"] == retry["key"] != other["key"]
    assert re.fullmatch(r"[A-Za-z0-9._:-]{1,64}", lost["key"])
    assert lost["status"] == retry["status"] == other["status"] == 200
    # the retry was answered from the server's record: spent once, the first answer given
    assert lost["replayed"] is None and retry["replayed"] == "true"
    assert retry["body"] == lost["body"] == json.loads(result["first"])
    assert other["replayed"] is None and json.loads(result["second"]) == other["body"]
    assert other["body"]["wood_left_fixed"] != lost["body"]["wood_left_fixed"]
    assert result["keys"][0] != result["keys"][1]


def test_errors_are_typed_and_carry_the_api_s_code(page: Page, stack: Stack) -> None:
    open_test_page(page, stack)
    page.route(
        "**/api/behind-a-proxy",
        lambda route: route.fulfill(
            status=502, body="<html>Bad gateway</html>", headers={"Retry-After": "2"}
        ),
    )
    out = page.evaluate("cases.errors('errs')")

    def check(name: str, status: int, code: str) -> dict[str, Any]:
        error: dict[str, Any] = out[name]
        assert error is not None, f"{name}: no error"
        assert (error["status"], error["code"]) == (status, code), (name, error)
        assert error["isApiError"] and error["isError"] and error["name"] == "ApiError"
        assert error["message"]
        return error

    check("anonymous", 401, "unauthorized")
    check("duplicate", 409, "name_taken")
    invalid = check("invalid", 422, "invalid_request")
    assert invalid["details"][0]["field"] == "wood" and invalid["retryable"] is False
    rule = check("rule", 409, "insufficient_resources")
    assert rule["message"] == "not enough wood" and rule["details"] == {"needed": 1_000_000}
    check("notFound", 404, "not_found")
    check("badQuery", 422, "invalid_request")
    proxy = check("proxy", 502, "http_502")
    assert proxy["retryAfterMs"] == 2000
    check("wrongPassword", 401, "invalid_credentials")
    check("afterLogout", 401, "unauthorized")
    assert out["mapHasOwnVillage"] is True
    assert out["logoutAgain"] is None
    assert out["login"] == out["afterLogin"] == "errs"
    # "unauthorized" is told for a missing session only, not for a wrong password
    assert out["eventsBeforeLogout"] == 1
    assert out["unauthorized"] == ["unauthorized"] * 3
    network = check("network", 0, "network")
    assert network["retryable"] is True
    assert len(out["networkKeys"]) == 3 and len(set(out["networkKeys"])) == 1


def test_the_generic_page_plays_a_game_without_a_client(page: Page, stack: Stack) -> None:
    refused: list[str] = []
    enforce_csp(page, f"{stack.url}/", refused)
    page.goto(stack.url)
    expect(page.locator(".note")).to_contain_text("generic page")
    page.get_by_label("Name", exact=True).fill("generic")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Register").click()

    # the snapshot as a tree
    tree = page.locator("#snapshot")
    expect(tree.locator('[data-path="name"] .value')).to_have_text('"generic"')
    village_id = tree.locator('[data-path="villages.0.id"] .value').inner_text()
    assert re.fullmatch(r"\d+", village_id)
    wood = tree.locator('[data-path="villages.0.stocks.wood.fixed"] .value')
    expect(wood).to_have_text(re.compile(r"^\d+$"))

    # the game's commands from the API document, the body prefilled from the schema
    expect(page.locator("#command option")).to_have_text(["test/spend"])
    expect(page.locator("#command-summary")).to_have_text("Spend wood (a test command)")
    body = json.loads(page.locator("#command-body").input_value())
    assert body == {"village_id": int(village_id), "wood": 1, "notify_village_id": None}

    # a command: its answer, and the snapshot it changed
    before = int(wood.inner_text())
    page.fill("#command-body", json.dumps({"village_id": int(village_id), "wood": 50}))
    page.get_by_role("button", name="Send").click()
    answer = page.locator("#command-answer")
    expect(answer).to_have_class("answer ok")
    left = json.loads(answer.inner_text())["wood_left_fixed"]
    expect(wood).to_have_text(str(left))
    assert left != before
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "generic.png"), full_page=True)

    # the API's error shape, and a body that is not JSON
    page.fill("#command-body", json.dumps({"village_id": int(village_id), "wood": 1_000_000}))
    page.get_by_role("button", name="Send").click()
    expect(answer).to_have_class("answer error")
    expect(answer).to_contain_text("409 insufficient_resources: not enough wood")
    page.fill("#command-body", "{wood: 5")
    page.get_by_role("button", name="Send").click()
    expect(answer).to_contain_text("not valid JSON")

    # folded branches stay folded across snapshots; a reload keeps the session
    page.locator('details[data-path="villages"] > summary').click()
    page.fill("#command-body", json.dumps({"village_id": int(village_id), "wood": 1}))
    page.get_by_role("button", name="Send").click()
    expect(answer).to_have_class("answer ok")
    expect(page.locator('details[data-path="villages"]')).not_to_have_attribute("open", "")
    page.reload()
    expect(tree.locator('[data-path="name"] .value')).to_have_text('"generic"')
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    expect(page.locator("#game")).to_be_hidden()
    assert refused == [], f"the page broke its Content-Security-Policy: {refused}"


def api_post(url: str, path: str, body: dict[str, Any], token: str | None = None) -> Any:
    """A request outside the browser (its own session: the page's cookie stays the page's)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{url}{path}", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_pushed_changes_are_fetched_at_once_and_alerts_arrive(page: Page, stack: Stack) -> None:
    """The poller holds GET /api/events: another player's command that touches this one
    refreshes its snapshot at once (its polls are 10 minutes apart) and brings the alert."""
    open_test_page(page, stack)
    village_id = page.evaluate("(name) => cases.startPushed(name)", "pushed")
    page.wait_for_function("pushed.seen.push.includes(true) && pushed.seen.snapshots.length >= 1")
    page.wait_for_function("!pushed.poller.inflight && pushed.poller.scheduled")
    assert page.evaluate("pushed.poller.delayMs()") == 600_000  # the safety interval
    before = page.evaluate("pushed.seen.snapshots.length")

    other = api_post(stack.url, "/api/register", {"name": "pusher", "password": PASSWORD})
    body = {"village_id": other["village_id"], "wood": 3, "notify_village_id": int(village_id)}
    api_post(stack.url, "/api/test/spend", body, other["token"])

    page.wait_for_function("(n) => pushed.seen.snapshots.length > n", arg=before, timeout=10_000)
    page.wait_for_function("pushed.seen.alerts.length >= 1", timeout=10_000)
    assert page.evaluate("pushed.seen.alerts") == [{"kind": "test_alert", "data": {"wood": 3}}]
    # the stream: one request with the page's cookie; the snapshot fetched with its ETag
    snapshots = page.evaluate("pushed.calls.filter((c) => c.url.endsWith('/api/snapshot'))")
    assert snapshots[-1]["headers"].get("If-None-Match")
    page.evaluate("pushed.poller.stop()")
    assert page.evaluate("pushed.seen.push.at(-1)") is False


def test_a_push_ahead_of_the_answer_is_polled_again_a_bounded_number_of_times(
    page: Page, stack: Stack
) -> None:
    """A version is pushed while the web process still answers 304 for the held one (it
    learns of the change from Redis a moment later): the poller polls again shortly after,
    until that version's snapshot comes; a version that never comes costs catchUpTries
    polls, then the safety interval is back."""
    open_test_page(page, stack)
    page.evaluate("(name) => cases.startPushed(name)", "ahead")
    # the first poll and the one after the stream opened are done (they are two: the page
    # polls at once, the stream opens a round trip later); then nothing polls for 10
    # minutes unless pushed
    settled = (
        "pushed.seen.push.includes(true) && pushed.seen.polls.length >= 2"
        " && pushed.seen.polls.at(-1).delayMs === 600000"
        " && !pushed.poller.inflight && pushed.poller.scheduled"
    )
    page.wait_for_function(settled)
    player = int(page.evaluate("pushed.poller.snapshot.player_id"))
    held = int(page.evaluate("pushed.poller.etag").removeprefix("W/").strip('"'))
    tries, catch_up_ms = CATCH_UP_TRIES, CATCH_UP_MS
    polls_since = "(n) => pushed.seen.polls.slice(n)"
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        # announced, never served: catchUpTries more polls, each later, then the safety wait
        start = page.evaluate("pushed.seen.polls.length")
        client.publish(push_channel(stack.redis_prefix), f"v {player}:{held + 1000}")
        page.wait_for_function(
            f"(n) => ({polls_since})(n).some((p) => p.delayMs === 600000)", arg=start
        )
        after = page.evaluate(polls_since, start)
        assert [p["status"] for p in after] == [304] * (1 + tries)
        assert [p["delayMs"] for p in after] == [
            *(catch_up_ms * n for n in range(1, tries + 1)),
            600_000,
        ]

        # announced before the server has it: the change reaches Redis only as the page
        # polls again (the first poll after the push is answered 304, as when the web
        # process had not yet heard of it); that poll or the next brings the snapshot
        asked: list[str] = []

        def late_change(route: Route) -> None:
            asked.append(route.request.url)
            if len(asked) == 2:
                client.incr(version_key(stack.redis_prefix, player))
            route.continue_()

        page.route(f"{stack.url}/api/snapshot", late_change)
        start = page.evaluate("pushed.seen.polls.length")
        snapshots = page.evaluate("pushed.seen.snapshots.length")
        client.publish(push_channel(stack.redis_prefix), f"v {player}:{held + 1}")
        page.wait_for_function("(n) => pushed.seen.snapshots.length > n", arg=snapshots)
        after = page.evaluate(polls_since, start)
        assert after[0]["status"] == 304 and after[-1]["status"] == 200
        assert 2 <= len(after) <= 1 + tries
        assert page.evaluate("pushed.poller.etag") == f'"{held + 1}"'
        assert after[-1]["delayMs"] == 600_000  # caught up: the safety interval again
        page.unroute(f"{stack.url}/api/snapshot", late_change)
    finally:
        client.close()
        page.evaluate("pushed.poller.stop()")


def test_without_a_stream_the_poller_polls_with_its_back_off(page: Page, stack: Stack) -> None:
    """The stream cannot be held (here: its URL answers 404): ETag polling goes on as without
    push, and the stream is tried again later (pushRetryMs), not in a loop."""
    open_test_page(page, stack)
    page.evaluate("(name) => cases.startUnpushed(name)", "unpushed")
    page.wait_for_function("unpushed.polls.length >= 6")
    assert page.evaluate("unpushed.poller.source") is None  # closed, a retry is timed
    assert page.evaluate("unpushed.push") == []  # it never opened
    delays = [p["delayMs"] for p in page.evaluate("unpushed.polls")]
    assert max(delays) <= 200  # the back-off, not the safety interval
    assert page.evaluate("unpushed.polls.filter((p) => p.status === 304).length") >= 3
    page.evaluate("unpushed.poller.stop()")
