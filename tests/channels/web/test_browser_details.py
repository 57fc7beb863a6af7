"""Details of the web a new user trips on: search hits, new conversations, the busy notice, the
page's own dialogs, stepping through the inspector, the phone list and the page icon."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Site, answer, send
from tests.channels.web.serve import BEARER
from tests.channels.web.ui import answer as answer_dialog
from tests.channels.web.ui import confirm, dialog, dismiss, failed_responses

pytestmark = pytest.mark.slow  # a real Chromium per test

PHONE = {"width": 390, "height": 844}


def create(page: Any, site: Site, title: str | None = None) -> str:
    """A conversation created through the API, as a script does."""
    body = {"title": title} if title else {}
    created = httpx.post(f"{site.url}/api/conversations", json=body, headers=BEARER)
    cid: str = created.json()["id"]
    return cid


def titles(page: Any, site: Site) -> list[str | None]:
    listed = httpx.get(f"{site.url}/api/conversations", headers=BEARER).json()
    return [c["title"] for c in listed["conversations"]]


def test_search_marks_each_match_and_names_the_conversation(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["primes = [2, 3, 5, 7]"]), answer("Four primes."))
    cid = create(page, site, "Prime hunting")
    page.goto(f"{site.url}/c/{cid}")
    send(page, "list the primes below ten")
    page.wait_for_selector("#turn-1[data-status='done']")
    page.goto(f"{site.url}/conversations?q=primes")
    page.wait_for_selector(".hits li")
    hits = page.locator(".hits li")
    assert hits.count() >= 2
    for n in range(hits.count()):
        hit = hits.nth(n)
        assert hit.locator("a").first.text_content() == "Prime hunting"
        assert "[primes]" not in hit.text_content()
        assert [m.lower() for m in hit.locator("mark").all_text_contents()] == ["primes"]
    assert page.locator(".hits code mark").count() == 1  # a hit in code reads as code
    page.click(".hits li a >> nth=0")
    page.wait_for_selector("#turn-1")
    assert page.url.startswith(f"{site.url}/c/{cid}#turn-1")


def test_new_conversation_is_created_by_its_first_message(site: Site, page: Any) -> None:
    create(page, site, "Already here")
    page.goto(f"{site.url}/conversations")
    page.click("#new-conversation")
    page.wait_for_selector("#composer")
    assert page.evaluate("document.activeElement.id") == "message"
    page.go_back()  # changed my mind
    page.wait_for_selector("#rows tr")
    assert page.locator("#rows tr").count() == 1
    assert titles(page, site) == ["Already here"]  # nothing left behind

    site.fake.add_replies(answer("Hello to you too."))
    page.click("#new-conversation")
    page.wait_for_selector("#composer")
    send(page, "hello")
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert page.text_content(".turn .answer").strip() == "Hello to you too."
    assert len(titles(page, site)) == 2
    cid = page.url.rsplit("/", 1)[1]
    assert page.url == f"{site.url}/c/{cid}"  # the address is the conversation's now
    page.fill("#message", "")
    page.click("#rename")
    answer_dialog(page, "Greetings")  # the conversation's own actions work at once
    page.wait_for_selector("#conv-title:text('Greetings')")
    page.reload()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert page.locator(".turn").count() == 1


def test_a_file_given_to_a_new_conversation_creates_it(
    site: Site, page: Any, tmp_path: Path
) -> None:
    page.goto(f"{site.url}/new")
    notes = tmp_path / "notes.txt"
    notes.write_text("remember this")
    page.set_input_files("#file-input", str(notes))
    page.wait_for_selector("#files a:text('notes.txt')")
    cid = page.url.rsplit("/", 1)[1]
    assert page.url == f"{site.url}/c/{cid}"
    assert (site.settings.store.workspaces / cid / "notes.txt").read_text() == "remember this"


def test_the_busy_notice_speaks_of_another_process_not_of_leases(site: Site, page: Any) -> None:
    cid = create(page, site)
    page.goto(f"{site.url}/c/{cid}")
    holder = f"{socket.gethostname()}:{os.getpid()}:8f3a2c1d"  # a live process of this host
    with sqlite3.connect(site.settings.store.database) as db:  # `cove run` holds it meanwhile
        db.execute(
            "UPDATE conversation SET lease_owner = ?, lease_until = ? WHERE id = ?",
            (holder, time.time() + 60, cid),
        )
    send(page, "are you free?")
    page.wait_for_selector("#notice.error")
    text = page.text_content("#notice")
    assert "another" in text.lower() and "running a turn in this conversation" in text
    assert "lease" not in text and holder not in text
    assert page.input_value("#message") == "are you free?"


def test_rename_and_delete_in_the_list_use_the_pages_own_dialog(site: Site, page: Any) -> None:
    cid = create(page, site, "Old name")
    page.goto(f"{site.url}/conversations")
    row = f"tr[data-id='{cid}']"
    page.click(f"{row} button[data-action='rename']")
    box = dialog(page).locator("input")
    assert box.input_value() == "Old name"
    assert page.evaluate("document.activeElement.tagName") == "INPUT"  # focus in the dialog
    assert dialog(page).get_attribute("aria-labelledby")
    dismiss(page)  # Escape: nothing changes, focus returns to the button
    assert page.evaluate("document.activeElement.dataset.action") == "rename"
    assert titles(page, site) == ["Old name"]

    page.click(f"{row} button[data-action='rename']")
    answer_dialog(page, "New name")
    page.wait_for_selector(f"{row} .title:text('New name')")
    assert titles(page, site) == ["New name"]

    page.click(f"{row} button[data-action='delete']")
    assert "New name" in dialog(page).text_content()
    dialog(page).locator("button[value='cancel']").click()
    assert titles(page, site) == ["New name"]
    page.click(f"{row} button[data-action='delete']")
    confirm(page)
    page.wait_for_selector(row, state="detached")
    assert titles(page, site) == []
    assert page.dialogs == []  # type: ignore[attr-defined]  # never the browser's own


def test_rename_and_delete_in_the_chat_view_use_the_pages_own_dialog(site: Site, page: Any) -> None:
    cid = create(page, site, "Chat name")
    page.goto(f"{site.url}/c/{cid}")
    page.click("#rename")
    dismiss(page)
    assert page.text_content("#conv-title") == "Chat name"
    page.click("#rename")
    answer_dialog(page, "Renamed in the chat")
    page.wait_for_selector("#conv-title:text('Renamed in the chat')")
    page.click("#delete")
    dismiss(page)
    assert titles(page, site) == ["Renamed in the chat"]
    page.click("#delete")
    confirm(page)
    page.wait_for_url(f"{site.url}/")
    assert titles(page, site) == []
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_the_inspector_steps_through_iterations_with_links_and_keys(site: Site, page: Any) -> None:
    site.fake.add_replies(
        answer("", ["a = 1"]),
        answer("", ["b = a + 1"]),
        answer("b is {{b}}"),
        answer("", ["c = b + 1"]),
        answer("c is {{c}}"),
    )
    cid = create(page, site)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "first")
    page.wait_for_selector("#turn-1[data-status='done']")
    send(page, "second")
    page.wait_for_selector("#turn-2[data-status='done']")
    base = f"{site.url}/c/{cid}/inspect"
    page.goto(f"{base}/1/1")
    assert page.locator("a[rel='prev']").count() == 0  # nothing before the first
    page.click("a[rel='next']")
    page.wait_for_url(f"{base}/1/2")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"{base}/1/3")
    page.keyboard.press("ArrowRight")  # on to the next turn
    page.wait_for_url(f"{base}/2/1")
    assert "c = b + 1" in page.text_content(".raw-reply")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"{base}/2/2")
    assert page.locator("a[rel='next']").count() == 0  # nothing after the last
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(f"{base}/2/1")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(f"{base}/1/3")
    page.click("a[rel='prev']")
    page.wait_for_url(f"{base}/1/2")
    assert page.get_attribute("a[rel='prev']", "aria-keyshortcuts") == "ArrowLeft"


def test_the_phone_list_keeps_each_row_tidy(site: Site, page: Any) -> None:
    for n in range(3):
        create(page, site, f"Conversation number {n} with a fairly long title")
    create(page, site)
    page.set_viewport_size(PHONE)
    page.goto(f"{site.url}/conversations")
    page.wait_for_selector("#rows tr")
    rows = page.locator("#rows tr")
    assert rows.count() == 4
    for n in range(rows.count()):
        row = rows.nth(n)
        actions = [a.bounding_box() for a in row.locator(".actions button, .actions a").all()]
        tops, bottoms = [b["y"] for b in actions], [b["y"] + b["height"] for b in actions]
        assert max(tops) < min(bottoms), f"row {n}: the actions are not on one line"
        assert all(box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] for box in actions)
        title = row.locator(".title").bounding_box()
        assert title is not None
        assert all(  # the title never shares a line with the buttons
            title["y"] + title["height"] <= box["y"] or box["y"] + box["height"] <= title["y"]
            for box in actions
        ), f"row {n}: title and actions overlap"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_every_page_has_an_icon(site: Site, page: Any) -> None:
    icon = page.goto(f"{site.url}/favicon.ico")
    assert icon is not None and icon.status == 200
    assert icon.headers["content-type"] == "image/x-icon"
    assert icon.body()[:4] == b"\x00\x00\x01\x00"  # an ICO file
    failures = failed_responses(page)
    site.fake.add_replies(answer("", ["x = 1"]), answer("x is {{x}}"))
    cid = create(page, site)
    page.goto(f"{site.url}/c/{cid}")
    send(page, "set x")
    page.wait_for_selector("#turn-1[data-status='done']")
    paths = ("/", "/conversations", f"/c/{cid}", f"/c/{cid}/inspect/1/1", f"/c/{cid}/vars/x")
    for path in paths:
        page.goto(f"{site.url}{path}")
        linked = page.get_attribute("link[rel='icon']", "href")
        assert linked is not None, path
        assert page.request.get(f"{site.url}{linked}").status == 200, path
    assert failures == []
