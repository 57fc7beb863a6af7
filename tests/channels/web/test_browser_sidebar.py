"""The web opens as a chat: the composer has the focus and a sidebar lists the conversations,
newest first, marked by how their last turn went, searchable by content; collapsible on a wide
window, a drawer on a phone. A new chat creates nothing until its first message."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Gate, Site, answer, send
from tests.channels.web.serve import BEARER
from tests.fakes.openai_server import Fault

pytestmark = pytest.mark.slow  # a real Chromium per test

DESKTOP = {"width": 1200, "height": 800}
PHONE = {"width": 390, "height": 844}


def conversations(site: Site) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = httpx.get(f"{site.url}/api/conversations", headers=BEARER).json()[
        "conversations"
    ]
    return found


def entry(cid: str) -> str:
    return f"#sidebar-entries li[data-id='{cid}']"


def test_the_web_opens_as_a_chat_that_creates_its_conversation_on_the_first_send(
    site: Site, page: Any
) -> None:
    page.set_viewport_size(DESKTOP)
    page.goto(site.url)
    page.wait_for_selector("#sidebar-entries li")  # they come just after the page
    assert page.evaluate("document.activeElement.id") == "message"
    assert page.text_content("#sidebar-entries").strip() == "No conversations yet."
    page.reload()  # opening a new chat, twice, created nothing
    assert conversations(site) == []

    site.fake.add_replies(answer("Forty-two."))
    send(page, "What is six times seven?")
    page.wait_for_selector(".turn[data-status='done'] .answer")
    cid = page.url.rsplit("/", 1)[1]
    assert [c["id"] for c in conversations(site)] == [cid]
    page.wait_for_selector(f"{entry(cid)} a[aria-current='page']")
    assert page.text_content(f"{entry(cid)} .conv-title").strip() == "What is six times seven?"
    assert page.text_content(f"{entry(cid)} .ago").strip() == "now"

    page.click("#new-conversation")
    page.wait_for_url(f"{site.url}/")
    assert page.evaluate("document.activeElement.id") == "message"
    assert page.locator(".turn").count() == 0
    page.click(f"{entry(cid)} a")  # back to the first one
    page.wait_for_selector("#turn-1 .answer")


def test_the_sidebar_lists_newest_first_with_marks_and_keeps_current(site: Site, page: Any) -> None:
    page.set_viewport_size(DESKTOP)
    site.fake.add_replies(answer("fine"))
    done = site.conversation()
    page.goto(f"{site.url}/c/{done}")
    send(page, "this one ends well")
    page.wait_for_selector(".turn[data-status='done']")
    failed = site.conversation()
    site.fake.add_faults(Fault.error(401, "invalid key"))
    page.goto(f"{site.url}/c/{failed}")
    send(page, "this one fails")
    page.wait_for_selector(".turn[data-status='failed']")
    gate = Gate(answer("late"))
    site.fake.add_replies(gate)
    running = site.conversation()
    with httpx.Client(base_url=site.url, headers=BEARER) as http:
        http.post(f"/api/conversations/{running}/messages", json={"text": "still working"})
    assert gate.reached.wait(30)

    page.wait_for_selector(f"{entry(running)} .mark.running")  # the open page saw it start
    order = page.eval_on_selector_all(
        "#sidebar-entries li", "items => items.map(i => i.dataset.id)"
    )
    assert order == [running, failed, done]
    assert page.text_content(f"{entry(failed)} .mark").strip() == "failed"
    assert page.locator(f"{entry(done)} .mark").count() == 0  # only what needs a look is marked
    gate.opened.set()
    page.wait_for_selector(f"{entry(running)}:not(:has(.mark))")


def test_searching_the_sidebar_finds_conversations_by_their_content(site: Site, page: Any) -> None:
    page.set_viewport_size(DESKTOP)
    site.fake.add_replies(
        answer("", ["zebra_count = 7", "zebra_count"]), answer("There are {{zebra_count}}.")
    )
    site.fake.add_replies(answer("Nothing striped here."))
    striped = site.conversation()
    page.goto(f"{site.url}/c/{striped}")
    send(page, "count the animals")
    page.wait_for_selector(".turn[data-status='done']")
    plain = site.conversation()
    page.goto(f"{site.url}/c/{plain}")
    send(page, "something else")
    page.wait_for_selector(".turn[data-status='done']")

    page.fill("#sidebar-search", "zebra_count")
    page.wait_for_selector("#sidebar-entries .side-hits")
    hits = page.locator("#sidebar-entries .side-hits a")
    assert hits.count() >= 1
    assert all(
        f"/c/{striped}#turn-1" == href
        for href in hits.evaluate_all("a => a.map(x => x.getAttribute('href'))")
    )
    assert "zebra_count" in page.text_content("#sidebar-entries mark")
    page.fill("#sidebar-search", "no such word anywhere")
    page.wait_for_selector("#sidebar-entries .empty:text('No matches.')")
    page.press("#sidebar-search", "Escape")  # clears the search: the list again
    page.wait_for_selector(entry(plain))
    page.fill("#sidebar-search", "zebra_count")
    page.click("#sidebar-entries .side-hits a")
    page.wait_for_url(f"{site.url}/c/{striped}#turn-1")
    page.wait_for_selector("#turn-1 .answer")


def test_the_sidebar_collapses_and_remembers_it(site: Site, page: Any) -> None:
    page.set_viewport_size(DESKTOP)
    page.goto(site.url)
    assert page.is_visible("#sidebar")
    assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "true"
    width = page.eval_on_selector("#thread", "node => node.clientWidth")
    page.click("#sidebar-toggle")
    assert page.is_hidden("#sidebar")
    assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "false"
    assert page.eval_on_selector("#thread", "node => node.clientWidth") > width  # the chat grew
    page.reload()
    assert page.is_hidden("#sidebar")
    page.click("#sidebar-toggle")
    assert page.is_visible("#sidebar")


def test_on_a_phone_the_sidebar_is_a_drawer(site: Site, page: Any) -> None:
    page.set_viewport_size(PHONE)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    assert page.is_hidden("#sidebar")  # the chat has the screen
    assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "false"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.click("#sidebar-toggle")
    page.wait_for_selector("#sidebar", state="visible")
    box = page.locator("#sidebar").bounding_box()
    assert box["x"] == 0 and box["width"] < PHONE["width"]  # over the chat, from the left
    page.press("#sidebar-search", "Escape")
    page.wait_for_selector("#sidebar", state="hidden")
    page.click("#sidebar-toggle")
    page.mouse.click(PHONE["width"] - 10, PHONE["height"] // 2)  # beside the drawer
    page.wait_for_selector("#sidebar", state="hidden")
    page.click("#sidebar-toggle")
    page.click(f"{entry(cid)} a")
    page.wait_for_selector("#composer")
