"""Branches in the chat: a conversation shows where it was forked from and its whole tree of
branches; over a turn asked in several branches, "‹ 2/3 ›" says which version this is and steps
to the others, with the mouse or the keyboard; a retry or an edit of turn 1 is a branch of the
conversation, not an unrelated one; a retry, an edit and a branch are named apart."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Site, answer, send
from tests.channels.web.serve import BEARER

pytestmark = pytest.mark.slow  # a real Chromium per test

DESKTOP = {"width": 1200, "height": 800}
PHONE = {"width": 390, "height": 844}


def record(site: Site, cid: str) -> dict[str, Any]:
    found: dict[str, Any] = httpx.get(f"{site.url}/api/conversations/{cid}", headers=BEARER).json()
    return found


def forks(site: Site, cid: str) -> list[tuple[str, int]]:
    listed = httpx.get(f"{site.url}/api/conversations/{cid}/forks", headers=BEARER).json()
    return [(f["id"], f["fork_turn"]) for f in listed["forks"]]


def opened_elsewhere(page: Any, *not_these: str) -> str:
    """Wait for the page to move to another conversation; its id."""
    page.wait_for_url(lambda url: "/c/" in url and not any(cid in url for cid in not_these))
    return str(page.url.split("/c/", 1)[1].split("#", 1)[0])


def test_retrying_the_first_turn_makes_a_branch_of_the_conversation(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["x = 10"]), answer("x is {{x}}."))
    cid = site.conversation()
    page.set_viewport_size(DESKTOP)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "set x to ten")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    assert page.locator("#branches").count() == 0  # no branch yet: nothing shown

    site.fake.add_replies(answer("", ["x = 11"]), answer("This time x is {{x}}."))
    page.click("#turn-1 button[data-action='retry']")
    retried = opened_elsewhere(page, cid)
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    assert page.text_content("#turn-1 .msg.user") == "set x to ten"
    assert page.text_content("#turn-1 .answer").strip() == "This time x is 11."
    assert page.locator(".turn").count() == 1  # none of the parent's turns
    assert record(site, retried)["parent_id"] == cid and record(site, retried)["fork_turn"] == 0
    note = page.text_content("#branches .fork-note")
    assert note.startswith("Branched from Browser test") and "before its first turn" in note

    # The original is one click away, and from it the retry again.
    assert switcher(page, 1) == ("2/2", cid, None)
    page.click("#turn-1 .turn-versions a[data-step='previous']")
    page.wait_for_url(f"{site.url}/c/{cid}#turn-1")
    assert page.text_content("#turn-1 .answer").strip() == "x is 10."
    assert switcher(page, 1) == ("1/2", None, retried)
    assert "All branches (2)" in page.text_content("#branches summary")
    page.click("#turn-1 .turn-versions a[data-step='next']")
    page.wait_for_url(f"{site.url}/c/{retried}#turn-1")
    assert page.text_content("#turn-1 .answer").strip() == "This time x is 11."


def test_editing_the_first_turn_branches_before_it(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("Hello."))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "say hello")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    site.fake.add_replies(answer("Goodbye."))
    page.click("#turn-1 button[data-action='edit']")
    page.fill("#message", "say goodbye")
    page.press("#message", "Enter")
    edited = opened_elsewhere(page, cid)
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    assert page.text_content("#turn-1 .msg.user") == "say goodbye"
    assert forks(site, cid) == [(edited, 0)]


def switcher(page: Any, position: int) -> tuple[str, str | None, str | None]:
    """What turn ``position``'s switcher shows: "2/3", and where ‹ and › lead (None: nowhere)."""
    nav = page.locator(f"#turn-{position} .turn-versions")
    shown = nav.locator(".count [aria-hidden]").text_content()
    steps = [
        nav.locator(f"a[data-step='{step}']").get_attribute("data-branch")
        if nav.locator(f"a[data-step='{step}']").count()
        else None
        for step in ("previous", "next")
    ]
    return shown, steps[0], steps[1]


def tree(page: Any) -> list[tuple[int, str, bool]]:
    """The branch list: (depth, conversation, open here) of each entry, top to bottom."""
    found: list[list[Any]] = page.eval_on_selector_all(
        "#branch-list a[data-branch]",
        """links => links.map(a => {
            let depth = 0;
            for (let e = a; e && !e.classList.contains('branch-tree'); e = e.parentElement)
                if (e.tagName === 'UL') depth++;
            return [depth + 1, a.dataset.branch, a.getAttribute('aria-current') === 'page'];
        })""",
    )
    return [(depth, branch, current) for depth, branch, current in found]


def test_a_turn_switches_between_its_versions_across_the_whole_tree(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["x = 10"]), answer("x is {{x}}."), answer("Twenty."))
    cid = site.conversation()
    page.set_viewport_size(DESKTOP)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "set x to ten")
    page.wait_for_selector("#turn-1[data-status='done']")
    send(page, "double x")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert page.locator(".turn-versions").count() == 0  # one version of each turn: no switcher

    site.fake.add_replies(answer("Twice {{x}} is twenty."))  # a retry of turn 2
    page.click("#turn-2 button[data-action='retry']")
    retried = opened_elsewhere(page, cid)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert switcher(page, 2) == ("2/2", cid, None)
    site.fake.add_replies(answer("Triple {{x}} is thirty."))  # an edit of turn 2, in the retry
    page.click("#turn-2 button[data-action='edit']")
    page.fill("#message", "triple x")
    page.press("#message", "Enter")
    edited = opened_elsewhere(page, cid, retried)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert record(site, edited)["parent_id"] == retried  # a branch of a branch
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-2 button[data-action='fork']")  # a branch that goes on after turn 2
    after = opened_elsewhere(page, cid, retried, edited)
    page.wait_for_selector("#branches .fork-note")
    site.fake.add_replies(answer("Forty."))
    send(page, "double it again")
    page.wait_for_selector("#turn-3[data-status='done'] .answer")
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-1 button[data-action='fork']")  # a branch after turn 1 that asks nothing
    idle = opened_elsewhere(page, cid, retried, edited, after)
    page.wait_for_selector("#branches .fork-note")

    # Turn 2 was asked three ways: the original's, the retry's and the edit made in the retry.
    page.goto(f"{site.url}/c/{cid}")
    assert page.locator("#turn-1 .turn-versions").count() == 0
    assert switcher(page, 2) == ("1/3", None, retried)
    page.click("#turn-2 .turn-versions a[data-step='next']")
    page.wait_for_url(f"{site.url}/c/{retried}#turn-2")
    assert switcher(page, 2) == ("2/3", cid, edited)
    page.click("#turn-2 .turn-versions a[data-step='next']")
    page.wait_for_url(f"{site.url}/c/{edited}#turn-2")
    assert page.text_content("#turn-2 .msg.user") == "triple x"
    assert switcher(page, 2) == ("3/3", retried, None)
    page.click("#turn-2 .turn-versions a[data-step='previous']")
    page.wait_for_url(f"{site.url}/c/{retried}#turn-2")
    assert page.text_content("#turn-2 .answer").strip() == "Twice 10 is twenty."
    # The branch that went on after turn 2 shows the original's turn 2 among the same three.
    page.goto(f"{site.url}/c/{after}")
    assert switcher(page, 2) == ("1/3", None, retried)

    # By keyboard: Tab from turn 1's last action reaches turn 2's ›; Enter follows it.
    page.goto(f"{site.url}/c/{cid}")
    page.focus("#turn-1 button[data-action='fork']")
    page.keyboard.press("Tab")
    focused = page.evaluate(
        "[document.activeElement.dataset.step, document.activeElement.innerText]"
    )
    assert focused == ["next", "›\nNext version, 2 of 3: “double x”"]
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.url}/c/{retried}#turn-2")
    page.focus("#turn-1 button[data-action='fork']")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # ‹ this time: the first of the switcher's links
    page.wait_for_url(f"{site.url}/c/{cid}#turn-2")

    # The whole tree, nested as it was forked, from any of its pages; names tell them apart.
    page.goto(f"{site.url}/c/{edited}")
    assert "All branches (5)" in page.text_content("#branches summary")
    page.click("#branches summary")
    assert tree(page) == [
        (1, cid, False),
        (2, retried, False),
        (3, edited, True),
        (2, after, False),
        (2, idle, False),
    ]
    labels = page.eval_on_selector_all("#branch-list a", "links => links.map(a => a.innerText)")
    assert labels == [
        "Browser test",
        "Retry of turn 2 · Browser test",
        "Edit of turn 2: “triple x” · Retry of turn 2 · Browser test",
        "Branch from turn 2 · Browser test",
        "Branch from turn 1 · Browser test",
    ]
    page.click(f"#branch-list a[data-branch='{idle}']")
    page.wait_for_url(f"{site.url}/c/{idle}#turn-2")
    assert page.locator(".turn").count() == 1

    # On a phone the switcher and the tree fit the screen, and still switch.
    page.set_viewport_size(PHONE)
    page.goto(f"{site.url}/c/{edited}")
    page.click("#branches summary")
    assert page.is_visible("#turn-2 .turn-versions a[data-step='previous']")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.click("#turn-2 .turn-versions a[data-step='previous']")
    page.wait_for_url(f"{site.url}/c/{retried}#turn-2")
