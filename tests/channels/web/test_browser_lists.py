"""What the web shows of a conversation's state, in Chromium: the list names a conversation
without a title by its first request and says how its last turn ended; a turn whose endpoint is
being retried says so; nudges meant for the model stay out of the timeline."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Gate, Site, answer, send
from tests.channels.web.serve import BEARER
from tests.fakes.openai_server import Fault

pytestmark = pytest.mark.slow  # a real Chromium per test

REQUEST = "Compute the squares of the numbers from one to forty and tell me their sum, please"


def start_turn(site: Site, text: str, *, finished: bool = False) -> str:
    """A new conversation (no title) whose first turn is ``text`` (and has ``finished``)."""
    with httpx.Client(base_url=site.url, timeout=30, headers=BEARER) as http:
        cid: str = http.post("/api/conversations", json={}).json()["id"]
        assert http.post(f"/api/conversations/{cid}/messages", json={"text": text}).is_success
        if finished:
            with http.stream("GET", f"/api/conversations/{cid}/events?after=0") as events:
                next(line for line in events.iter_lines() if '"turn_finished"' in line)
    return cid


def row(cid: str) -> str:
    return f"tr[data-id='{cid}']"


def test_the_list_names_conversations_by_their_request_and_shows_how_each_ended(
    site: Site, page: Any
) -> None:
    site.fake.add_replies(answer("The sum is 22140."))
    done = start_turn(site, REQUEST, finished=True)
    page.goto(f"{site.url}/conversations")
    page.wait_for_selector(f"{row(done)} .status:text('done')")
    title = page.text_content(f"{row(done)} .title").strip()
    assert title.startswith("Compute the squares of the") and title.endswith("…")
    assert "Untitled" not in page.text_content("#rows")
    site.fake.add_faults(Fault.error(401, "invalid key"))
    failed = start_turn(site, "this one fails")
    page.wait_for_selector(f"{row(failed)} .status:text('failed')")
    assert page.text_content(f"{row(failed)} .title").strip() == "this one fails"
    gate = Gate(answer("late"))
    site.fake.add_replies(gate)
    running = start_turn(site, "still working on it")
    page.wait_for_selector(f"{row(running)} .status:text('running')")
    gate.opened.set()
    page.wait_for_selector(f"{row(running)} .status:text('done')")
    page.goto(f"{site.url}/c/{done}")
    assert page.text_content("#conv-title").strip() == title


def test_a_retried_endpoint_shows_retrying_in_the_live_turn(site: Site, page: Any) -> None:
    gate = Gate(answer("made it"))
    site.fake.add_faults(Fault.server_error(503))
    site.fake.add_replies(gate)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "try again if you must")
    page.wait_for_selector(".turn.live .iteration .retry")
    assert page.text_content(".turn.live .iteration .retry").startswith("retrying (1 of 2)")
    gate.opened.set()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert page.text_content(".answer").strip() == "made it"


def test_nudges_for_the_model_stay_out_of_the_timeline(site: Site, page: Any) -> None:
    last = Gate(answer("x is {{x}}"))
    site.fake.add_replies(answer("", ["x = 1"]), last)
    cid = start_turn(site, "no title given")
    page.goto(f"{site.url}/c/{cid}")
    page.wait_for_selector(".turn.live .iteration[data-iteration='2']")
    url = f"{site.url}/api/conversations/{cid}/events?after=0"
    with httpx.Client(timeout=30, headers=BEARER) as http, http.stream("GET", url) as events:
        lines = (line for line in events.iter_lines() if line.startswith("data:"))
        nudge = next(json.loads(line[5:]) for line in lines if '"nudge"' in line)
    assert nudge["text"].startswith("The conversation has no title yet")
    assert nudge["kind"] == "title"
    assert "no title yet" not in page.text_content("#turns")
    last.opened.set()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    page.reload()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert "no title yet" not in page.text_content("#turns")
