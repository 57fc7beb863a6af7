"""Approval cards in a real browser: a call of the example plugin (``notes_add``, effect
``write``, asked about by default) waits in a turn until someone answers on a page open on the
conversation; the first answer wins, every page sees the outcome, no answer in time denies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cove.channels.web import create_app
from tests.channels.web.browser import Site, answer, login, send
from tests.channels.web.serve import BEARER, served_in_thread
from tests.fakes.openai_server import FakeOpenAI
from tests.plugins.conftest import notes_file, notes_site  # noqa: F401 (the example plugin)
from tests.plugins.test_example_plugin import notes

pytestmark = pytest.mark.slow  # a real Chromium, a sandbox worker

HOSTILE_NOTE = "<img src=x onerror=alert(1)><b>bold</b>"
CARD = ".approval[data-state='waiting']"
#: No data libraries in the sandbox (none is used): its worker starts sooner on a busy machine.
LEAN = {"sandbox_libraries": False}
#: The first card waits for a worker to start and a turn to reach the call: longer than the
#: default on a loaded machine.
FIRST_MS = 60_000


@pytest.fixture
def quick(notes_file: Path, fake_openai: FakeOpenAI, openai_settings: Any) -> Iterator[Site]:  # noqa: F811
    """The web app with the example plugin installed and a short approval timeout."""
    settings = openai_settings.replace(
        worker_pool_size=1, request_timeout_s=60.0, approval_timeout_s=4.0, **LEAN
    )
    with served_in_thread(create_app(settings)) as url:
        yield Site(url, fake_openai, settings)


@pytest.fixture
def patient(notes_file: Path, fake_openai: FakeOpenAI, openai_settings: Any) -> Iterator[Site]:  # noqa: F811
    """The web app with the example plugin installed (the approval timeout: two minutes)."""
    settings = openai_settings.replace(worker_pool_size=1, request_timeout_s=60.0, **LEAN)
    with served_in_thread(create_app(settings)) as url:
        yield Site(url, fake_openai, settings)


def decided(page: Any, site: Site, cid: str, turn: int) -> list[str]:
    """The decisions the inspector lists under the turn's first iteration."""
    page.goto(f"{site.url}/c/{cid}/inspect/{turn}/1")
    return page.locator(".approvals li").all_inner_texts()  # type: ignore[no-any-return]


def outcome(page: Any) -> str:
    page.wait_for_selector(".approval[data-state='resolved']")
    return page.locator(".approval .approval-outcome").last.inner_text()  # type: ignore[no-any-return]


def test_a_card_asks_every_page_the_first_answer_wins_and_remember_holds(
    patient: Site,
    page: Any,
    browser: Any,
    notes_file: Path,  # noqa: F811
) -> None:
    site = patient
    site.fake.add_replies(
        answer("", [f"notes_add({HOSTILE_NOTE!r})"]),
        answer("noted"),
        answer("", ['notes_add("second")']),
        answer("noted again"),
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "note it")
    page.wait_for_selector(CARD, timeout=FIRST_MS)
    # A page opened while the call waits shows the card too.
    other = browser.new_context().new_page()
    other.set_default_timeout(20_000)
    login(other, site.url)
    other.goto(f"{site.url}/c/{cid}")
    other.wait_for_selector(CARD)
    call = page.locator(f"{CARD} .approval-call").inner_text()
    assert call == f"notes_add({HOSTILE_NOTE!r})"  # the sandbox's text, shown as text
    assert page.locator(".approval img, .approval script").count() == 0
    assert "notes_add" in page.locator(CARD).get_attribute("aria-label")
    assert "write" in page.locator(f"{CARD} .approval-what").inner_text()

    # The keyboard alone: focus is on Approve; back to the checkbox, tick it, Approve.
    assert page.evaluate("document.activeElement.textContent") == "Approve"
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    assert outcome(page) == "Approved. (remembered for this conversation)"
    assert outcome(other) == "Approved. (remembered for this conversation)"
    assert other.locator(".approval button:enabled").count() == 0  # decided: nothing to press
    page.wait_for_selector("#turn-1[data-status='done'] .answer")

    # Remembered: the next call runs without a card.
    send(page, "note another")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert page.locator(".approval").count() == 1
    assert page.dialogs == []  # nothing in the card ran
    assert notes(notes_file) == [HOSTILE_NOTE, "second"]
    first, second = decided(page, site, cid, 1), decided(page, site, cid, 2)
    assert first == [
        f"notes_add({HOSTILE_NOTE!r}) · write · approved · by the person"
        " · remembered for the conversation"
    ]
    assert second == ["notes_add('second') · write · approved · as the person said to remember"]
    other.context.close()


def test_escape_denies_and_the_model_is_told(patient: Site, page: Any, notes_file: Path) -> None:  # noqa: F811
    site = patient
    site.fake.add_replies(answer("", ['notes_add("no")']), answer("it was refused"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "note it")
    page.wait_for_selector(CARD, timeout=FIRST_MS)
    page.keyboard.press("Escape")
    assert outcome(page) == "Denied."
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    assert page.locator("#turn-1").get_attribute("data-status") == "done"  # Escape stopped nothing
    assert notes(notes_file) == []
    seen = json.dumps(site.fake.requests[-1]["messages"])
    assert "the person denied it" in seen
    assert decided(page, site, cid, 1) == ["notes_add('no') · write · denied · by the person"]


def test_no_answer_in_time_is_a_denial_the_card_says_so_and_late_answers_are_refused(
    quick: Site,
    page: Any,
    notes_file: Path,  # noqa: F811
) -> None:
    site = quick
    site.fake.add_replies(answer("", ['notes_add("late")']), answer("nobody answered"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "note it")
    page.wait_for_selector(".approval", timeout=FIRST_MS)  # on a slow machine: decided already
    card_id = page.locator(".approval").get_attribute("data-id")
    assert outcome(page) == "Nobody answered in time: denied."
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    late = httpx.post(
        f"{site.url}/api/conversations/{cid}/approvals/{card_id}",
        json={"approved": True},
        headers=BEARER,
    )
    assert late.status_code == 409
    assert "Nobody answered in time" in late.json()["message"]
    assert notes(notes_file) == []
    assert decided(page, site, cid, 1) == [
        "notes_add('late') · write · denied · nobody answered in time"
    ]


def test_an_answer_passes_the_same_checks_as_every_post(patient: Site, notes_file: Path) -> None:  # noqa: F811
    site = patient
    site.fake.add_replies(answer("", ['notes_add("checked")']), answer("done"))
    cid = site.conversation()
    with httpx.Client(base_url=site.url, headers=BEARER, timeout=60) as client:
        events = client.stream("GET", f"/api/conversations/{cid}/events")
        with events as stream:
            sent = client.post(f"/api/conversations/{cid}/messages", json={"text": "note it"})
            assert sent.status_code == 202
            lines = stream.iter_lines()
            asked = _first_notice(lines, "approval_asked")
            url = f"/api/conversations/{cid}/approvals/{asked['id']}"
            refusals = [
                httpx.post(f"{site.url}{url}", json={"approved": True}),  # no login
                client.post(url, json={"approved": True}, headers={"origin": "http://evil.test"}),
                client.post(url, json={"approved": "yes"}),
                client.post(url, content=b"not json"),
                client.post(f"/api/conversations/{cid}/approvals/nope", json={"approved": True}),
            ]
            assert [r.status_code for r in refusals] == [401, 403, 422, 422, 404]
            other = client.post("/api/conversations", json={}).json()["id"]
            wrong = client.post(
                f"/api/conversations/{other}/approvals/{asked['id']}", json={"approved": True}
            )
            assert wrong.status_code == 404  # an id of another conversation answers nothing
            assert client.post(url, json={"approved": True}).status_code == 200
            assert client.post(url, json={"approved": False}).status_code == 409
            resolved = _first_notice(lines, "approval_resolved")
            assert resolved["outcome"] == "approved"
    assert asked["arguments"] == "'checked'" and asked["effect"] == "write"
    assert asked["extension"] == asked["function"] == "notes_add"


def _first_notice(lines: Iterator[str], kind: str) -> dict[str, Any]:
    for line in lines:
        if line.startswith("data: "):
            data: dict[str, Any] = json.loads(line[6:])
            if data.get("type") == kind:
                return data
    raise AssertionError(f"the stream ended before a {kind} notice")
