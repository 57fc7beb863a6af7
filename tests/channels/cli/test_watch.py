"""``cove watch --events`` in its own process follows turns run by another; turns are named by
position, never by row id."""

from __future__ import annotations

import json

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply


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
