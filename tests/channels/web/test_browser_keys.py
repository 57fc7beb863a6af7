"""The chat from the keyboard and a turn's actions: each shortcut does what the help overlay
lists; copy an answer or a block's code; stop; retry, edit-and-resend and branch from a turn."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.channels.web import ui
from tests.channels.web.browser import Gate, Site, answer, send
from tests.channels.web.serve import BEARER

pytestmark = pytest.mark.slow  # a real Chromium per test

DESKTOP = {"width": 1200, "height": 800}


def clipboard(page: Any) -> str:
    text: str = page.evaluate("navigator.clipboard.readText()")
    return text


def finished_chat(site: Site, page: Any) -> str:
    """A conversation with one turn that ran a block and answered."""
    site.fake.add_replies(
        answer("", ["side = 6", "area = side * side", "area"]), answer("The area is **{{area}}**.")
    )
    cid = site.conversation()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.set_viewport_size(DESKTOP)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "the area of a square of side 6")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    return cid


def test_the_help_overlay_lists_the_shortcuts_and_each_works(site: Site, page: Any) -> None:
    finished_chat(site, page)
    page.click("#thread")  # the focus away from the message box
    page.keyboard.press("Control+/")
    help = ui.dialog(page)
    listed = help.locator("dd").all_text_contents()
    for what in ("New chat", "Search", "Stop", "Copy the last answer", "Copy the last code"):
        assert any(what.lower() in line.lower() for line in listed), what
    stop = next(line for line in listed if line.startswith("Stop"))
    assert "in a text box, Escape first leaves the box" in stop  # as the page behaves
    assert help.locator("kbd").count() >= 8
    page.keyboard.press("Escape")
    ui.closed(page)
    page.click("#shortcuts")  # the same overlay from its button
    ui.dialog(page).locator("button:text('Close')").click()
    ui.closed(page)

    page.keyboard.press("Alt+Shift+A")
    page.wait_for_selector("#notice:text('Answer copied')")
    assert clipboard(page) == "The area is 36."
    page.keyboard.press("Alt+Shift+C")
    page.wait_for_selector("#notice:text('Code copied')")
    assert clipboard(page) == "area"  # the last block of the turn

    page.keyboard.press("Control+K")
    assert page.evaluate("document.activeElement.id") == "sidebar-search"
    page.keyboard.press("Shift+Escape")
    assert page.evaluate("document.activeElement.id") == "message"
    page.keyboard.press("Alt+Shift+S")
    assert page.is_hidden("#sidebar")
    page.keyboard.press("Alt+Shift+S")
    assert page.is_visible("#sidebar")
    page.keyboard.press("Alt+Shift+N")
    page.wait_for_url(f"{site.url}/")
    assert page.locator(".turn").count() == 0


def test_escape_while_typing_leaves_the_box_and_only_then_stops(site: Site, page: Any) -> None:
    gate = Gate(answer("never shown"))
    site.fake.add_replies(gate)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "take your time")
    assert gate.reached.wait(30)
    page.wait_for_selector("#stop", state="visible")
    page.type("#message", "half a thought")
    page.keyboard.press("Escape")  # in the message box: leaves it, stops nothing
    assert page.evaluate("document.activeElement.id") != "message"
    assert page.input_value("#message") == "half a thought"  # what was typed stays
    page.keyboard.press("Control+K")
    assert page.evaluate("document.activeElement.id") == "sidebar-search"
    page.keyboard.press("Escape")  # the empty search box: left too
    assert page.evaluate("document.activeElement.id") != "sidebar-search"
    # A stop would have changed the button at once, in the key's own handler.
    assert page.text_content("#stop") == "Stop" and page.is_enabled("#stop")
    page.keyboard.press("Escape")  # from elsewhere on the page: stops the turn
    page.wait_for_selector(".turn[data-status='cancelled']")
    gate.opened.set()


def test_a_block_copies_its_code_and_a_turn_its_answer(site: Site, page: Any) -> None:
    finished_chat(site, page)
    page.click("#turn-1 > details > summary")
    page.click("#turn-1 .iteration[data-iteration='1'] summary")
    page.locator("#turn-1 .block").first.locator("button[data-action='copy-code']").click()
    page.wait_for_selector("#notice:text('Code copied')")
    assert clipboard(page) == "side = 6"
    page.click("#turn-1 button[data-action='copy-answer']")
    page.wait_for_function(
        "() => document.querySelector('#notice').textContent === 'Answer copied'"
    )
    assert clipboard(page) == "The area is 36."


def test_iterations_fold_to_a_line_when_finished(site: Site, page: Any) -> None:
    last = Gate(answer("done"))
    site.fake.add_replies(answer("", ["a = 1"]), answer("", ["b = 2"]), last)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "three iterations")
    assert last.reached.wait(30)
    page.wait_for_selector(".turn.live .iteration[data-iteration='3']")
    opened = page.eval_on_selector_all(
        ".turn.live .iteration > details", "its => its.map(i => i.open)"
    )
    assert opened == [False, False, True]  # the running one is open
    assert page.is_hidden(".turn.live .iteration[data-iteration='1'] .block")
    page.click(".turn.live .iteration[data-iteration='1'] summary")  # the reader opens one
    assert page.is_visible(".turn.live .iteration[data-iteration='1'] .block")
    last.opened.set()
    page.wait_for_selector(".turn[data-status='done'] .answer")


def test_retry_edit_and_branch_start_new_conversations_from_a_turn(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["x = 10"]), answer("x is {{x}}."))
    cid = site.conversation()
    page.set_viewport_size(DESKTOP)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "set x to ten")
    page.wait_for_selector("#turn-1[data-status='done']")
    site.fake.add_replies(answer("Double is twenty."))
    send(page, "double x")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")

    # Retry turn 2: a branch at turn 1 that asks the same again (and sees x from turn 1).
    site.fake.add_replies(answer("Twice {{x}} is twenty."))
    page.click("#turn-2 button[data-action='retry']")
    page.wait_for_url(lambda url: cid not in url)
    retried = page.url.rsplit("/", 1)[1]
    page.wait_for_selector("#turn-2[data-status='done'] .answer")  # after the turn it shares
    assert page.text_content("#turn-2 .msg.user") == "double x"
    assert page.text_content("#turn-2 .answer").strip() == "Twice 10 is twenty."
    assert page.text_content(".fork-note").startswith("Branched from")

    # Edit turn 2 of the original: the request in the box, sending starts another branch.
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-2 button[data-action='edit']")
    assert page.input_value("#message") == "double x"
    assert page.is_visible("#editing")
    site.fake.add_replies(answer("Triple {{x}} is thirty."))
    page.fill("#message", "triple x")
    page.press("#message", "Enter")
    page.wait_for_url(lambda url: cid not in url and retried not in url)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert page.text_content("#turn-2 .msg.user") == "triple x"
    assert page.text_content("#turn-2 .answer").strip() == "Triple 10 is thirty."

    # Cancelling an edit sends into the conversation itself again.
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-1 button[data-action='edit']")
    page.click("#editing-cancel")
    assert page.is_hidden("#editing") and page.input_value("#message") == ""

    # Branch from turn 2: a new conversation that goes on after it.
    page.click("#turn-2 button[data-action='fork']")
    page.wait_for_url(lambda url: cid not in url)
    page.wait_for_selector(".fork-note")
    assert "at turn 2" in page.text_content(".fork-note")


def test_an_edited_request_that_cannot_start_leaves_no_branch_and_keeps_the_text(
    site: Site, page: Any
) -> None:
    site.fake.add_replies(answer("", ["x = 10"]), answer("x is {{x}}."), answer("again"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "set x to ten")
    page.wait_for_selector("#turn-1[data-status='done']")
    send(page, "and again")
    page.wait_for_selector("#turn-2[data-status='done']")
    before = httpx.get(f"{site.url}/api/conversations", headers=BEARER).json()["conversations"]
    page.click("#turn-2 button[data-action='edit']")
    too_long = "y" * 100_001
    page.fill("#message", too_long)
    page.press("#message", "Enter")
    page.wait_for_selector("#notice.error")
    assert "over 100,000 characters" in page.text_content("#notice")
    assert page.url == f"{site.url}/c/{cid}"
    assert page.input_value("#message") == too_long  # nothing typed is lost
    after = httpx.get(f"{site.url}/api/conversations", headers=BEARER).json()["conversations"]
    assert [c["id"] for c in after] == [c["id"] for c in before]  # the branch is gone again
