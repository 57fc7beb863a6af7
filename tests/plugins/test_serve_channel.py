"""``cove serve --channel NAME``: a channel an installed package adds, run beside the others.

A real ``cove serve`` process finds the example plugin's ``inbox`` channel (group
``cove.channels``) through ``PYTHONPATH``; the channel drives turns through the same
``Conversations`` API the built-in channels use, and serves a page of its own behind the
service's login, ``Host`` and ``Origin`` checks.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.channels.cli.helpers import wait_until
from tests.channels.serve.process import ServeProcess, serve_env
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # a cove serve process with a sandbox worker


@pytest.fixture
def server() -> FakeOpenAI:
    with FakeOpenAI() as fake:
        yield fake  # type: ignore[misc]


def test_serve_runs_the_plugins_channel_and_refuses_one_not_installed(
    tmp_path: Path, server: FakeOpenAI, notes_site: Path
) -> None:
    inbox = tmp_path / "inbox"
    env = serve_env(tmp_path, server) | {
        "PYTHONPATH": str(notes_site),
        "NOTEBOOK_INBOX": str(inbox),
        "NOTEBOOK_FILE": str(tmp_path / "notes.json"),
        "COVE_SANDBOX_LIBRARIES": "0",
        "COVE_WEB_TOKEN": "a-token-of-the-service-0123",
    }
    server.add_replies(reply(["total = 6 * 7"], "the answer is {{total}}"))
    serve = ServeProcess(env, "--channel", "inbox")
    try:
        serve.wait_for(lambda line: '"serving"' in line, timeout=60)
        (tmp_path / "request.txt").write_text("what is 6 * 7?")
        (tmp_path / "request.txt").rename(inbox / "q.txt")  # whole, as a drop is
        answer = inbox / "q.answer"
        wait_until(answer.exists, "the inbox channel's answer", seconds=60)
        assert answer.read_text() == "the answer is 42"
        assert server.requests[0]["messages"][1]["content"].count("what is 6 * 7?") == 1
        # Its page, on the service's one HTTP server, behind the same checks as the web's.
        page, token = (
            f"{serve.base_url}/inbox",
            {"Authorization": f"Bearer {env['COVE_WEB_TOKEN']}"},
        )
        listed = httpx.get(page, headers=token)
        assert listed.status_code == 200 and listed.json() == {"waiting": [], "answered": ["q"]}
        assert httpx.get(page).status_code == 401
        rebound = httpx.get(page, headers={**token, "Host": "127.0.0.1.evil.example"})
        assert rebound.status_code == 403
        foreign = httpx.post(page, headers={**token, "Origin": "http://evil.example"})
        assert foreign.status_code == 403
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=60) == 0
    finally:
        serve.stop()
    refused = subprocess.run(
        [sys.executable, "-m", "cove", "serve", "--channel", "nope", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode != 0
    assert (
        "no channel named 'nope' is installed (installed: inbox, mcp, telegram, web)"
        in refused.stderr
    )
