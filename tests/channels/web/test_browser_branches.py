"""Branches in the chat: a conversation shows where it was forked from and the branches made
from it; beside a turn, the other versions of that turn, each one click away; a retry or an
edit of turn 1 is a branch of the conversation, not an unrelated one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Site, answer, send
from tests.channels.web.serve import BEARER

pytestmark = pytest.mark.slow  # a real Chromium per test

DESKTOP = {"width": 1200, "height": 800}


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
    assert page.text_content("#turn-1 .turn-branches a[data-branch]") == "“set x to ten”"
    page.click("#turn-1 .turn-branches a[data-branch]")
    page.wait_for_url(f"{site.url}/c/{cid}#turn-1")
    assert page.text_content("#turn-1 .answer").strip() == "x is 10."
    assert "1 branch from here" in page.text_content("#branches summary")
    page.click(f"#turn-1 .turn-branches a[data-branch='{retried}']")
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


def test_a_turn_shows_its_versions_and_the_conversation_its_branches(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["x = 10"]), answer("x is {{x}}."), answer("Twenty."))
    cid = site.conversation()
    page.set_viewport_size(DESKTOP)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "set x to ten")
    page.wait_for_selector("#turn-1[data-status='done']")
    send(page, "double x")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")

    site.fake.add_replies(answer("Twice {{x}} is twenty."))  # a retry of turn 2
    page.click("#turn-2 button[data-action='retry']")
    retried = opened_elsewhere(page, cid)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    page.goto(f"{site.url}/c/{cid}")
    site.fake.add_replies(answer("Triple {{x}} is thirty."))  # an edit of turn 2
    page.click("#turn-2 button[data-action='edit']")
    page.fill("#message", "triple x")
    page.press("#message", "Enter")
    edited = opened_elsewhere(page, cid, retried)
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-2 button[data-action='fork']")  # a branch that goes on after turn 2
    after = opened_elsewhere(page, cid, retried, edited)
    page.wait_for_selector("#branches .fork-note")
    assert page.locator(".turn-branches").count() == 0  # the original has no turn 3
    page.goto(f"{site.url}/c/{cid}")
    page.click("#turn-1 button[data-action='fork']")  # a branch after turn 1 that asks nothing
    idle = opened_elsewhere(page, cid, retried, edited, after)
    page.wait_for_selector("#branches .fork-note")

    # The original lists its four branches, with where each forked.
    page.goto(f"{site.url}/c/{cid}")
    assert "4 branches from here" in page.text_content("#branches summary")
    page.click("#branches summary")
    listed = page.eval_on_selector_all(
        "#branches li",
        "items => items.map(i => [i.querySelector('a').dataset.branch, i.innerText])",
    )
    assert [branch for branch, _ in listed] == [retried, edited, idle, after]
    assert ["at turn 1" in text for _, text in listed] == [True, True, True, False]
    assert "at turn 2" in listed[3][1]
    # Turn 2 has three versions here, each named by what it asked (the idle branch asked
    # nothing yet); turn 1 none (nothing forked before it).
    assert page.locator("#turn-1 .turn-branches").count() == 0
    versions = page.locator("#turn-2 .turn-branches")
    assert "Turn 2 in 3 branches" in versions.text_content()
    assert versions.locator("a[aria-current='page']").text_content() == "this one"
    assert versions.locator("a[data-branch]").all_text_contents() == ["“double x”", "“triple x”"]

    # One click to the edited version; from there, the sibling and the original.
    versions.locator(f"a[data-branch='{edited}']").click()
    page.wait_for_url(f"{site.url}/c/{edited}#turn-2")
    assert page.text_content("#turn-2 .msg.user") == "triple x"
    there = page.locator("#turn-2 .turn-branches a[data-branch]")
    assert [there.nth(n).get_attribute("data-branch") for n in range(there.count())] == [
        cid,
        retried,
    ]
    assert there.all_text_contents() == ["“double x”", "“double x”"]  # the original, the retry
    page.click(f"#turn-2 .turn-branches a[data-branch='{retried}']")
    page.wait_for_url(f"{site.url}/c/{retried}#turn-2")
    assert page.text_content("#turn-2 .answer").strip() == "Twice 10 is twenty."
    page.click("#branches .fork-note a")
    page.wait_for_url(f"{site.url}/c/{cid}")
    assert page.text_content("#turn-2 .answer").strip() == "Twenty."
