"""Smoke test in a real terminal: tmux runs ``cove tui`` on a scripted conversation, at 120x40
and at 80x24, types a request and reads the answer off the screen."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cove.channels.cli.tui import SCRIPTED_ENV

pytestmark = pytest.mark.slow  # cove in tmux

TMUX = shutil.which("tmux")


# A private tmux server (its own socket), so no other tmux session is ever touched; one per
# test, so a server still exiting after the previous test is never reached.
SOCKET = [f"cove-tui-test-{os.getpid()}"]


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", SOCKET[0], *args], capture_output=True, text=True, check=True
    ).stdout


def capture(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(session: str, text: str, seconds: float = 60.0) -> str:
    # Polls the screen: a terminal offers no event to wait on.
    deadline = time.monotonic() + seconds
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_cove_tui_in_tmux(tmp_path: Path, size: tuple[int, int]) -> None:
    """At 120x40 the sidebar shows; at 80x24 it makes room (F4 shows it) and the footer fits."""
    if TMUX is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is required in CI (.ci/run installs it)")
        pytest.skip("tmux is not installed: the real-terminal smoke test needs it")
    SOCKET[0] = f"cove-tui-test-{os.getpid()}-{size[0]}x{size[1]}"
    replies = tmp_path / "replies.json"
    replies.write_text(
        json.dumps([{"thinking": "add", "code": ["x = 40 + 2"], "answer": "The sum is {{x}}."}])
    )
    cove = [sys.executable, "-m", "cove", "--db", str(tmp_path / "cove.db"), "tui"]
    # Passed on the command line: a tmux server does not hand its client's environment on.
    env = [
        "env",
        "-u",
        "OPENAI_API_KEY",
        "-u",
        "OPENAI_BASE_URL",
        "-u",
        "COLUMNS",  # the terminal's own size counts, not one inherited from the test run
        "-u",
        "LINES",
        f"{SCRIPTED_ENV}={replies}",
        f"COVE_DATA_DIR={tmp_path}",
        "COVE_SANDBOX_LIBRARIES=0",
        "COVE_WORKER_POOL_SIZE=1",
        "TERM=xterm-256color",
        f"PYTHONPATH={Path(__file__).parents[3]}",
    ]
    session = "cove"
    tmux(
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        str(size[0]),
        "-y",
        str(size[1]),
        "-c",
        str(tmp_path),
        *env,
        *cove,
    )
    try:
        screen = wait_for(session, "f4 Sidebar")
        narrow = size[0] < 100
        assert ("filter conversations" in screen) is not narrow, screen
        [footer] = [line for line in screen.splitlines() if "f4 Sidebar" in line]
        assert footer.lstrip().startswith("^n New") and ("^p palette" in footer) is not narrow, (
            footer
        )
        tmux("send-keys", "-t", session, "-l", "add two numbers")
        tmux("send-keys", "-t", session, "Enter")
        screen = wait_for(session, "The sum is 42.")
        assert "add two numbers" in screen
        assert all(len(line) <= size[0] for line in screen.splitlines())
        if narrow:
            tmux("send-keys", "-t", session, "F4")
            screen = wait_for(session, "filter conversations")
            assert "add two numbers" in screen  # the conversation is listed by its request
        tmux("send-keys", "-t", session, "C-q")
    finally:
        subprocess.run(["tmux", "-L", SOCKET[0], "kill-server"], capture_output=True, check=False)


def test_cove_tui_with_an_unknown_id_fails_before_the_screen_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cove.channels.cli import main
    from cove.channels.cli.exits import EXIT_NOT_FOUND

    assert main(["--db", str(tmp_path / "cove.db"), "tui", "nosuch"]) == EXIT_NOT_FOUND
    assert "nosuch" in capsys.readouterr().err
