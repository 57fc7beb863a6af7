"""The chat view in a real browser, continued: what a turn shows after a reload, Stop on running
code, refused sends, the variables panel during a turn, the inspector's exact messages, replay
divergence and uploads the server refuses (renaming and deleting: test_browser_details.py)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cove.channels.web import create_app
from cove.config import Settings
from tests.channels.web.browser import Gate, Site, answer, send
from tests.channels.web.serve import BEARER, served_in_thread
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.slow  # a real Chromium per test


def code(source: str, timeout_s: float) -> str:
    return json.dumps({"thinking": "t", "code": [{"code": source, "timeout_s": timeout_s}]})


SPIN_FOREVER = "while True:\n    pass"


def take_lease_elsewhere(database: str | Path, cid: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute(
            "UPDATE conversation SET lease_owner = 'elsewhere', lease_until = ? WHERE id = ?",
            (time.time() + 60, cid),
        )


def notes(page: Any) -> list[str]:
    return page.locator(".turn .nudge, .turn .restart").all_text_contents()  # type: ignore[no-any-return]


def test_nudges_and_sandbox_restarts_are_still_shown_after_a_reload(site: Site, page: Any) -> None:
    site.fake.add_replies(
        answer("", ["keep = [1, 2]"]), code(SPIN_FOREVER, 1), answer("kept {{keep}}")
    )
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "spin once")
    page.wait_for_selector(".turn[data-status='done'] .answer")
    live = notes(page)
    assert any(text.startswith("Sandbox restarted (timeout)") for text in live)
    # The restart shows once, as itself; the nudge telling the model about it is the model's.
    assert not any("restarted" in t for t in page.locator(".turn .nudge").all_text_contents())
    page.reload()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    assert notes(page) == live  # nothing missing, nothing doubled
    restart = page.locator(".iteration[data-iteration='2'] .block + .restart")
    assert restart.count() == 1  # right after the block that was running


def test_stop_kills_the_code_that_is_running(site: Site, page: Any) -> None:
    site.fake.add_replies(code(SPIN_FOREVER, 120))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "spin for two minutes")
    page.wait_for_selector(".turn.live .block.running")
    page.click("#stop")
    # Within the test's 20 s, far below the block's 120 s: the worker running it was killed.
    page.wait_for_selector(".turn[data-status='cancelled']")
    site.fake.add_replies(answer("", ["1 + 1"]), answer("sandbox fine"))
    send(page, "still there?")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert page.text_content("#turn-2 .block .value") == "→ 2"


def test_a_send_refused_before_its_turn_starts_is_reported(site: Site, page: Any) -> None:
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    take_lease_elsewhere(site.settings.store.database, cid)  # another process runs a turn
    send(page, "are you there?")
    page.wait_for_selector("#notice.error")
    assert page.text_content("#notice").startswith("Not sent: ")
    assert page.input_value("#message") == "are you there?"  # nothing lost
    assert page.locator(".msg.queued").count() == 0 and page.locator(".turn").count() == 0


def test_variable_sizes_stay_filled_while_the_turn_runs(site: Site, page: Any) -> None:
    second, last = Gate(answer("", ["x = x + [4]"])), Gate(answer("done"))
    site.fake.add_replies(answer("", ["x = [1, 2, 3]"]), second, last)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "grow x")
    size = "#vars tr[data-name='x'] .size"
    page.wait_for_selector(f"{size}:text('len 3')")
    assert second.reached.wait(10) and page.locator(".turn.live").count() == 1
    second.opened.set()
    page.wait_for_selector("#vars tr[data-name='x'] .version:text('v2')")
    page.wait_for_selector(f"{size}:text('len 4')")
    assert page.locator(".turn.live").count() == 1  # still running: sizes did not wait for it
    last.opened.set()
    page.wait_for_selector(".turn[data-status='done']")
    assert page.text_content(size) == "len 4"


def test_table_alignment_survives_the_content_security_policy(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("| n | name |\n|--:|:--:|\n| 1 | ada |"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "a table")
    page.wait_for_selector(".turn[data-status='done'] .answer table")
    aligned = page.evaluate(
        "[...document.querySelectorAll('.answer td')].map(c => getComputedStyle(c).textAlign)"
    )
    assert aligned == ["right", "center"]


def test_the_inspector_shows_exactly_the_messages_sent(site: Site, page: Any) -> None:
    site.fake.add_replies(answer("", ["z = 5 * 5"]), answer("z is {{z}}"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    send(page, "square five")
    page.wait_for_selector("#turn-1[data-status='done']")
    sent = [r["messages"] for r in site.fake.requests]
    for number, messages in enumerate(sent, start=1):
        page.goto(f"{site.url}/c/{cid}/inspect/1/{number}")
        roles = page.eval_on_selector_all(".message", "items => items.map(i => i.dataset.role)")
        assert roles == [m["role"] for m in messages]
        assert page.locator(".message .content").all_text_contents() == [
            m["content"] for m in messages
        ]
    assert json.loads(page.text_content(".raw-reply"))["answer"] == "z is {{z}}"


def test_replay_reports_a_divergence(site: Site, page: Any, tmp_path: Path) -> None:
    site.fake.add_replies(answer("", ["n = read_file('n.txt')"]), answer("n is {{n}}"))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    first = tmp_path / "n.txt"
    first.write_text("one")
    page.set_input_files("#file-input", str(first))
    page.wait_for_selector("#files a:text('n.txt')")
    send(page, "read n")
    page.wait_for_selector("#turn-1[data-status='done']")
    first.write_text("two")  # chosen again, changed: the replay reads this one
    page.set_input_files("#file-input", str(first))
    page.wait_for_selector("#notice:text('Uploaded n.txt')")
    page.click("#replay")
    page.wait_for_selector("#replay-report h3")
    assert page.text_content("#replay-report h3") == "Replay diverged"
    assert "Turn 1: 1/1 blocks matched" in page.text_content("#replay-report")
    mismatch = page.text_content("#replay-report pre.error")
    assert "variable n v1" in mismatch and "'one'" in mismatch and "'two'" in mismatch


def test_an_upload_the_server_refuses_shows_its_reason(
    site: Site, page: Any, tmp_path: Path
) -> None:
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    page.evaluate("document.body.dataset.uploadLimit = String(1e12)")  # skip the page's check
    limit = site.settings.sandbox.max_file_read_bytes
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (limit + 1))
    page.set_input_files("#file-input", str(big))
    page.wait_for_selector("#notice.error")
    assert f"over the upload limit of {limit:,} bytes" in page.text_content("#notice")  # 413
    assert list((site.settings.store.workspaces / cid).iterdir()) == []  # nothing written


def test_a_queued_message_refused_when_its_time_comes_is_reported(
    page: Any, fake_openai: FakeOpenAI, openai_settings: Settings
) -> None:
    settings = openai_settings.replace(worker_pool_size=1, lease_ttl_s=0.3, request_timeout_s=60)
    second = Gate(answer("never shown"))
    fake_openai.add_replies(answer("", ["x = 1"]), second)
    with served_in_thread(create_app(settings)) as url:
        cid = httpx.post(f"{url}/api/conversations", json={}, headers=BEARER).json()["id"]
        page.goto(f"{url}/c/{cid}")
        send(page, "one")
        assert second.reached.wait(30)
        # The answer to sending "two" ("queued") is held back until after its refusal has
        # streamed in, as on a slow connection: it must not clear the refusal's notice.
        held: list[tuple[Any, Any]] = []
        page.route("**/messages", lambda route: held.append((route, route.fetch())))
        send(page, "two")
        page.wait_for_selector(".msg.queued:text('two (queued)')")
        while not held:
            page.wait_for_timeout(20)
        take_lease_elsewhere(
            settings.store.database, cid
        )  # the running turn stops, "two" cannot run
        page.wait_for_selector("#notice.error")
        route, response = held[0]
        route.fulfill(response=response)
        page.wait_for_function("() => !document.querySelector('.msg.queued')")
        page.wait_for_timeout(200)  # the page has handled the late answer
        assert page.text_content("#notice").startswith("Not sent: ")
        assert page.locator("#notice.error").count() == 1
        assert page.input_value("#message") == "two"  # given back to edit or send again
        second.opened.set()
