"""``cove chat`` in a real terminal (tmux): chat commands, Ctrl-C cancelling a running turn,
and leaving with /exit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.channels.cli.helpers import environment, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove in tmux

SOCKET = f"cove-chat-test-{os.getpid()}"  # a private tmux server: no other session is touched
SESSION = "chat"
SPIN = reply([{"code": "while True:\n    pass", "timeout_s": 60}])  # type: ignore[list-item]


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True
    ).stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", SESSION)


def wait_for(text: str, after: str = "") -> str:
    """Wait until ``text`` shows on the screen (after the last ``after``, when given)."""
    shown = ""

    def appeared() -> bool:
        nonlocal shown
        shown = screen()
        return text in shown.rpartition(after)[2] if after else text in shown

    try:
        wait_until(appeared, repr(text), seconds=60)
    except AssertionError:
        raise AssertionError(f"{text!r} never appeared; the screen was:\n{shown}") from None
    return shown


def type_line(text: str) -> None:
    tmux("send-keys", "-t", SESSION, "-l", text)
    tmux("send-keys", "-t", SESSION, "Enter")


def test_chat_commands_and_ctrl_c_in_a_real_terminal(tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is required in CI (.ci/run installs it)")
        pytest.skip("tmux is not installed: the real-terminal test needs it")
    with FakeOpenAI() as server:
        server.add_replies(SPIN, reply(["x = 5"], "x is {{x}}"), reply(["x = x + 1"], "now {{x}}"))
        env = environment(tmp_path, server) | {
            "COVE_BLOCK_TIMEOUT_MAX_S": "60",
            "TERM": "xterm-256color",
            "PYTHONPATH": str(Path(__file__).parents[3]),
        }
        # Passed on the command line: a tmux server does not hand its client's environment on.
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items())]
        command += [sys.executable, "-m", "cove", "chat"]
        tmux("new-session", "-d", "-s", SESSION, "-x", "120", "-y", "50", *command)
        try:
            tmux("set-option", "-t", SESSION, "remain-on-exit", "on")
            wait_for("/help lists the commands")
            type_line("/help")
            wait_for("!multi ... !end")
            type_line("spin forever")
            wait_for("running code", after="spin forever")  # the block runs: the spinner says so
            tmux("send-keys", "-t", SESSION, "C-c")
            wait_for("cancelled ·", after="spin forever")
            type_line("set x")
            wait_for("x is 5")
            type_line("/var x")
            wait_for("value", after="/var x")
            type_line("!multi")
            type_line("add one")
            type_line("to x")
            type_line("!end")
            wait_for("now 6")
            type_line("/fork 2")
            wait_for("now in fork")
            type_line("/exit")
            final = wait_for("saved", after="/exit")
            assert "Traceback" not in final
        finally:
            subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False)
    requests = [m["content"] for r in server.requests for m in r["messages"] if m["role"] == "user"]
    assert any("add one\nto x" in text for text in requests)
