"""``cove`` as a real process: exit codes through the real entry point, Ctrl-C, kill -9 and a
second process on a busy conversation. Every wait is on an event the process or the fake
endpoint reports, never a fixed sleep."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.channels.cli.helpers import CoveProcess, hold_conversation, read_events_until
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers

SPIN = reply([{"code": "while True:\n    pass", "timeout_s": 60}])  # type: ignore[list-item]


def test_the_entry_point_returns_the_documented_exit_codes(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.respond_with(reply(["n = 1"]))
    assert proc_cli("run", "--max-iterations", "1", "spin").returncode == 3
    assert proc_cli("run").returncode == 2
    assert proc_cli("frobnicate").returncode == 2
    assert proc_cli("show", "does-not-exist").returncode == 7
    version = proc_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("cove ")


def test_a_second_process_on_the_same_conversation_is_busy(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    conv_id, slow = hold_conversation(proc_cli, server)
    busy = proc_cli("run", "-c", conv_id, "intruder")
    assert busy.returncode == 6
    assert "busy" in busy.stderr
    slow.send_signal(signal.SIGTERM)
    _, err = slow.communicate(timeout=30)
    assert slow.returncode == 5, err
    server.add_replies(reply(["b = 2"], "free again"))
    after = proc_cli("run", "-c", conv_id, "now")
    assert after.returncode == 0 and after.stdout == "free again\n", after.stderr


def test_kill_9_mid_turn_leaves_an_interrupted_turn_and_the_conversation_continues(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    def first(body: dict[str, Any]) -> str:
        server.add_faults(Fault.stall(60.0))
        return reply(["kept = [1, 2, 3]"])

    server.add_replies(first, reply(["never = 1"]))
    proc = proc_cli.popen("run", "--events", "long task")
    # The first iteration is recorded when its variables are: then the second call stalls.
    changed = read_events_until(proc, "vars_changed")
    cid = changed["conversation_id"]
    read_events_until(proc, "iteration_started", iteration=2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    turn = proc_cli.json("show", cid)["turns"][0]
    assert turn["status"] == "interrupted"
    assert turn["iterations"][0]["status"] == "ok"
    kept = proc_cli.json("vars", cid)
    assert [v["preview"] for v in kept if v["name"] == "kept"] == ["[1, 2, 3]"]
    server.add_replies(reply(["len(kept)"], "{{kept}}"))
    resumed = proc_cli("run", "-c", cid, "continue")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "[1, 2, 3]"


def test_ctrl_c_cancels_a_run_and_exits_with_the_cancelled_code(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(SPIN)
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = proc_cli.popen("run", "--events", "spin")
    started = read_events_until(proc, "block_started")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert "cancelled" in err
    shown = proc_cli.json("show", started["conversation_id"])
    assert shown["turns"][0]["status"] == "cancelled"


def test_ctrl_c_in_chat_cancels_the_turn_and_the_chat_goes_on(
    tmp_path: Path, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(SPIN, reply(["after = 1"], "still here"))
    proc_cli.env |= {"COVE_BLOCK_TIMEOUT_MAX_S": "60", "PYTHONUNBUFFERED": "1"}
    proc = proc_cli.popen("chat", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("spin\n")
    proc.stdin.flush()
    for line in proc.stdout:  # piped, the chat prints the code it is about to run
        if "while True:" in line:
            break
    proc.send_signal(signal.SIGINT)
    proc.stdin.write("next\n")
    proc.stdin.flush()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "cancelled" in out and "still here" in out
