"""``cove exec [ID] CODE``: code runs in a conversation's sandbox with no model, as a turn of
its own; output on stdout, errors on stderr, the exit status from how the turn ended."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess


def conversation_of(stderr: str) -> str:
    """The conversation id ``cove exec`` names on stderr."""
    line = next(line for line in stderr.splitlines() if line.startswith("conversation "))
    return line.split()[1]


def test_exec_runs_code_with_no_model_and_continues_a_conversation(tmp_path: Path) -> None:
    cli = Cove(tmp_path, None)  # no model endpoint at all
    first = cli("exec", "rows = [3, 1, 2]\nprint('sorted:', sorted(rows))\nlen(rows)")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "sorted: [1, 2, 3]\n3\n"
    cid = conversation_of(first.stderr)

    again = cli("exec", cid[:8], "rows.append(9)\nmax(rows)")
    assert (again.exit_code, again.stdout) == (0, "9\n")
    piped = cli("exec", cid, "-", stdin="total = sum(rows)\nprint(total)\n")
    assert piped.stdout == "15\n"

    shown = json.loads(cli("show", cid, "--json").stdout)
    assert [(t["position"], t["model"], t["status"]) for t in shown["turns"]] == [
        (1, None, "done"),
        (2, None, "done"),
        (3, None, "done"),
    ]
    assert cli("show", cid).stdout.count("no model") == 3


def test_a_failing_block_exits_1_with_its_error_on_stderr_and_json(tmp_path: Path) -> None:
    cli = Cove(tmp_path, None)
    cid = conversation_of(cli("exec", "x = 1").stderr)
    failed = cli("exec", cid, "print('before')\nx / 0")
    assert failed.exit_code == 1
    assert failed.stdout == "before\n"
    assert "ZeroDivisionError: division by zero" in failed.stderr
    result = json.loads(cli("exec", cid, "x + 1", "--json").stdout)
    assert (result["status"], result["value"], result["turn"]) == ("done", "2", 3)
    assert cli("exec", cid, "   ").exit_code == 2
    assert cli("exec", "0" * 32, "1").exit_code == 7  # no such conversation


@pytest.mark.slow  # cove processes
def test_ctrl_c_cancels_the_running_block(tmp_path: Path) -> None:
    proc_cli = CoveProcess(tmp_path, None)
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "600"
    made = proc_cli("exec", "n = 0")
    cid = conversation_of(made.stderr)
    watch = proc_cli.popen("watch", cid, "--events")
    assert watch.stdout is not None and watch.stderr is not None
    # Attached before the block is sent (a watch follows the turns that start after it).
    assert "watching" in watch.stderr.readline()
    spinning = proc_cli.popen(
        "exec", cid, "print('spinning', flush=True)\nwhile True:\n    n += 1", "--timeout", "600"
    )
    for line in watch.stdout:  # another process sees the block start
        if json.loads(line)["type"] == "block_started":
            break
    spinning.send_signal(signal.SIGINT)
    _, err = spinning.communicate(timeout=60)
    watch.terminate()
    watch.communicate(timeout=30)
    assert spinning.returncode == 5, err
    assert "cancelled" in err
    assert proc_cli("exec", cid, "n").stdout == "0\n"
