"""``cove replay`` of turns that were stopped: cancelled with Ctrl-C (SIGINT) mid-block, cut by
a crash (kill -9) mid-block, cancelled while the model answered. A stopped block is not run
again: the replay stops the turn where the record stopped, and that is not a divergence."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.channels.cli.helpers import CoveProcess, wait_for_requests
from tests.channels.cli.test_reliability import no_traceback, wait_for_block
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers

#: Spins until stopped; a replay that runs it again waits its whole minute and then diverges.
SPIN: dict[str, Any] = {"code": "while True:\n    pass", "timeout_s": 60}


def replayed(proc_cli: CoveProcess, cid: str) -> tuple[int, list[dict[str, Any]], str]:
    result = proc_cli("replay", cid, "--json")
    no_traceback(result)
    return (
        result.returncode,
        [json.loads(line) for line in result.stdout.splitlines()],
        result.stderr,
    )


def test_a_turn_cancelled_with_ctrl_c_mid_block_replays_as_cancelled(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["total = 6"], "{{total}}"),  # turn 1
        reply(["before = total + 1", SPIN], thinking="then spin"),  # type: ignore[list-item]
        reply(["after = before * 2"], "{{after}}"),  # turn 3 uses what turn 2 left
    )
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    assert proc_cli("run", "first").returncode == 0
    [conv] = proc_cli.json("list")
    proc = proc_cli.popen("run", "--events", "-c", conv["id"], "spin")
    wait_for_block(proc, 2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 5
    third = proc_cli("run", "-c", conv["id"], "go on")
    assert third.returncode == 0 and third.stdout.strip() == "14", third.stderr

    code, events, err = replayed(proc_cli, conv["id"])
    assert code == 0, err
    turns = [e for e in events if e["type"] == "replay_turn_checked"]
    assert [(t["recorded_status"], t["replayed_status"]) for t in turns] == [
        ("done", "done"),
        ("cancelled", "cancelled"),
        ("done", "done"),
    ]
    assert all(t["mismatches"] == [] for t in turns)
    assert events[-1]["type"] == "replay_finished" and events[-1]["ok"]
    shown = proc_cli("replay", conv["id"])
    assert "turn 2: match" in shown.stdout and "(cancelled → cancelled)" in shown.stdout


def test_a_turn_cut_by_a_crash_mid_block_replays_as_cancelled(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["kept = [1, 2, 3]", SPIN]))  # type: ignore[list-item]
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = proc_cli.popen("run", "--events", "crash in the middle")
    cid = wait_for_block(proc, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)

    code, events, err = replayed(proc_cli, cid)  # a writing open: the turn becomes interrupted
    assert code == 0, err
    [turn] = [e for e in events if e["type"] == "replay_turn_checked"]
    assert (turn["recorded_status"], turn["replayed_status"]) == ("interrupted", "cancelled")
    assert turn["mismatches"] == [] and turn["blocks"] == turn["matched"] == 1


def test_a_one_iteration_turn_cancelled_at_the_model_never_replays_as_max_iterations(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_faults(Fault.stall(60))
    server.add_replies(reply(["x = 1"], "never"))
    proc_cli.env["COVE_REQUEST_TIMEOUT_S"] = "120"
    proc = proc_cli.popen("run", "wait for the model")
    wait_for_requests(server, 1)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 5
    [conv] = proc_cli.json("list")

    code, events, err = replayed(proc_cli, conv["id"])
    assert code == 0, err
    [turn] = [e for e in events if e["type"] == "replay_turn_checked"]
    assert (turn["recorded_status"], turn["replayed_status"]) == ("cancelled", "cancelled")
