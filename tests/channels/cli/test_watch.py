"""``cove watch --events`` in its own process follows turns run by another; turns are named by
position, never by row id."""

from __future__ import annotations

import json
import signal

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess, read_events_until
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers


def test_watch_events_name_turns_by_position(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["a = 1"], "one"), reply(["b = 2"], "two"))
    assert cli("run", "first").exit_code == 0
    [conv] = cli.json("list")
    watcher = proc_cli.popen("watch", conv["id"], "--events", "--once")
    assert watcher.stderr is not None
    assert "watching" in watcher.stderr.readline()  # attached: what runs now is seen
    assert cli("run", "-c", conv["id"], "second").exit_code == 0
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["type"] == "turn_finished" and events[-1]["answer"] == "two"
    assert all("turn_id" not in e for e in events)
    assert {e["turn"] for e in events if "turn" in e} == {2}
    replayed = proc_cli("watch", conv["id"], "--events", "--after", "0", "--once")
    first = [json.loads(line) for line in replayed.stdout.splitlines()]
    assert first[-1]["type"] == "turn_finished" and first[-1]["answer"] == "one"
    assert {e["turn"] for e in first if "turn" in e} == {1}


def test_watch_attached_mid_turn_heads_what_it_shows_and_says_how_the_turn_ended(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    spin = {"code": "while True:\n    pass", "timeout_s": 60}
    server.add_replies(reply(["a = 1"], "one"), reply(["b = 2", spin]))  # type: ignore[list-item]
    assert cli("run", "first").exit_code == 0
    [conv] = cli.json("list")
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    running = proc_cli.popen("run", "-c", conv["id"], "--events", "spin")
    read_events_until(running, "block_started", index=2)  # the turn is mid-block now
    watcher = proc_cli.popen("watch", conv["id"], "--once")
    assert watcher.stderr is not None
    assert "watching" in watcher.stderr.readline()
    running.send_signal(signal.SIGINT)  # cancelled: the spinning block is stopped
    running.communicate(timeout=60)
    shown, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    lines = shown.splitlines()
    assert lines[0] == f"turn 2 of {conv['id'][:12]} (already running)"
    assert lines[1] == "iteration 1"
    assert "✗ block 2 stopped: the turn was cancelled" in lines
    assert "CancelledError" not in shown
    assert lines[-1].startswith("cancelled · 1 iteration(s)")
