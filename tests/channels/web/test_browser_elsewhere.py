"""The chat view in a real browser: Stop on a turn another process runs (``cove run -c``)
reaches that process, and the button says it is stopping until the turn ends; a refused answer
shows its reason live and after the turn, and an unknown cost reads as unknown."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tests.channels.web.browser import Gate, Site, answer
from tests.scripted import reply

pytestmark = pytest.mark.slow  # a real Chromium per test

#: Records every label the Stop button shows, so a short-lived one is not missed.
WATCH_STOP_LABEL = """() => {
  const stop = document.querySelector("#stop");
  window.stopLabels = [stop.textContent];
  new MutationObserver(() => window.stopLabels.push(stop.textContent))
    .observe(stop, { childList: true, characterData: true, subtree: true });
}"""


def run_elsewhere(
    site: Site, cid: str, text: str, *, libraries: bool = False
) -> subprocess.Popen[str]:
    """``cove run -c`` on the site's database and endpoint, as a process of its own; its
    sandbox loads the data libraries only with ``libraries`` (a second or more of CPU)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(site.settings.store.data_dir),
        "COVE_DATA_DIR": str(site.settings.store.data_dir),
        "COVE_SANDBOX_LIBRARIES": "1" if libraries else "0",
        "COVE_DB": site.settings.store.database,
        "OPENAI_BASE_URL": site.fake.base_url,
        "OPENAI_API_KEY": "sk-fake-web-elsewhere",
        "COVE_MODEL": "fake-model",
        "COVE_REQUEST_TIMEOUT_S": "60",
        "COVE_WORKER_POOL_SIZE": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cove", "run", "-c", cid, text],
        env=env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_stop_reaches_a_turn_that_another_process_runs(site: Site, page: Any) -> None:
    held = Gate(answer("never shown"))
    site.fake.add_replies(answer("", ["a = 1"]), held)
    cid = site.conversation()
    process = run_elsewhere(site, cid, "a long turn")
    try:
        assert held.reached.wait(30)  # the other process waits for the model in iteration 2
        page.goto(f"{site.url}/c/{cid}")
        page.wait_for_selector(".turn.live .iteration[data-iteration='2']")
        page.wait_for_selector("#stop:visible")
        page.evaluate(WATCH_STOP_LABEL)
        page.click("#stop")
        page.wait_for_selector(".turn[data-status='cancelled']")
        _, err = process.communicate(timeout=60)
    finally:
        held.opened.set()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 5, err  # the process that ran the turn: cancelled
    assert "Stopping…" in page.evaluate("window.stopLabels")
    page.wait_for_selector("#stop", state="hidden")
    assert page.text_content("#stop") == "Stop"  # ready for the next turn
    assert "never shown" not in page.text_content("#turns")


def test_a_refused_answer_shows_its_reason_live_and_after_the_turn(site: Site, page: Any) -> None:
    refused = "answer refused: undefined placeholder(s) {{x}}"
    held = Gate(reply(["x = 3"], "result={{x}}"))
    site.fake.add_replies(answer("result={{x}}"), held)
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    page.fill("#message", "what is x?")
    page.press("#message", "Enter")
    live = page.wait_for_selector(  # folded once the next iteration starts
        ".turn.live .iteration[data-iteration='1'] .refusal", state="attached"
    )
    assert live.text_content().startswith(refused)  # while the turn still runs
    held.opened.set()
    page.wait_for_selector(".turn[data-status='done'] .answer")
    first = page.locator(".turn[data-status='done'] .iteration[data-iteration='1'] .refusal")
    assert first.text_content().startswith(refused)
    summary = page.text_content(".turn[data-status='done'] summary")
    assert "cost unknown" in summary and "$0.0000" not in summary
