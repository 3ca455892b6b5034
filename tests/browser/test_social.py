"""The alliance and messages panels in Chromium: alice founds an alliance and invites bob,
bob accepts in his page, alice writes to the alliance, bob's badge counts it until he opens
it, and the text shows as text (no markup of a player's becomes an element)."""

from __future__ import annotations

from playwright.sync_api import expect, sync_playwright

from tests.browser.stack import Stack, launch_chromium, log_in, new_page, register


def test_alliance_and_messages_panels(stack: Stack) -> None:
    register(stack.url, "alice")
    register(stack.url, "bob")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            alice, bob = (new_page(browser, errors, stack.url) for _ in range(2))
            log_in(alice, stack.url, "alice")
            log_in(bob, stack.url, "bob")

            alice.get_by_label("Alliance name").fill("Night Owls")
            alice.get_by_label("Tag").fill("OWL")
            alice.get_by_role("button", name="Found alliance").click()
            expect(alice.locator("#alliance-title")).to_have_text("[OWL] Night Owls")
            alice.locator("#alliance-invitee").fill("bob")
            alice.locator("#alliance-invite").get_by_role("button", name="Invite").click()
            expect(alice.locator("#alliance-sent")).to_contain_text("bob")

            invitation = bob.locator("#alliance-invitations li", has_text="[OWL] Night Owls")
            invitation.get_by_role("button", name="Accept").click()
            expect(bob.locator("#alliance-title")).to_have_text("[OWL] Night Owls")
            expect(alice.locator("#alliance-members li")).to_have_count(2)  # pushed to alice
            members = alice.evaluate(
                "fetch('/api/snapshot').then((r) => r.json()).then((s) => s.alliance.members)"
            )
            assert len(members) == 2  # what the map marks

            alice.get_by_label("my alliance").check()
            alice.get_by_label("Subject").fill("Dawn")
            text = "<img src=x onerror=alert(1)><b>bold</b>\nsecond line"
            alice.get_by_label("Text").fill(text)
            alice.get_by_role("button", name="Post").click()
            expect(alice.locator("#messages-status")).to_have_text("Message sent.")

            badge = bob.locator("#messages-unread")
            expect(badge).to_have_text("1 new")
            message = bob.locator("#messages-list li", has_text="Dawn")
            message.get_by_role("button", name="Dawn").click()
            body = message.locator(".message-body")
            expect(body).to_be_visible()
            assert body.inner_text() == text  # shown as text, line break kept
            assert body.locator("img, b").count() == 0
            expect(badge).to_be_hidden()  # read: the snapshot's count went to 0

            bob.once("dialog", lambda dialog: dialog.accept())
            bob.get_by_role("button", name="Leave alliance").click()
            expect(bob.locator("#alliance-create")).to_be_visible()
            expect(alice.locator("#alliance-members li")).to_have_count(1)
        finally:
            browser.close()
    assert not errors, errors
