"""Nudges meant for the model are not shown to people in ``cove chat`` or ``cove watch``; the
record keeps them (``--events``, ``cove show --prompts``). Why an answer was refused is shown."""

from __future__ import annotations

import json

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers

TITLE_NUDGE = "The conversation has no title yet"


def test_chat_shows_no_nudge_meant_for_the_model(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 1"]), reply(["y = 2"]), reply([], "{{nope}}"), reply([], "ok"))
    result = cli("chat", stdin="three steps\n")
    assert result.exit_code == 0, result.stderr
    assert "iteration 3" in result.stdout and "ok" in result.stdout
    assert TITLE_NUDGE not in result.stdout + result.stderr
    assert "answer refused: undefined placeholder" in result.stdout  # people see why
    [conv] = cli.json("list")
    assert TITLE_NUDGE in cli("show", conv["id"], "--prompts").stdout


def test_watch_shows_no_nudge_meant_for_the_model_and_events_keep_them(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["a = 1"], "first"))
    assert cli("run", "start").exit_code == 0
    [conv] = cli.json("list")
    watcher = proc_cli.popen("watch", conv["id"], "--once")
    events = proc_cli.popen("watch", conv["id"], "--events", "--once")
    for proc in (watcher, events):
        assert proc.stderr is not None and "watching" in proc.stderr.readline()
    server.add_replies(reply(["b = 2"]), reply(["c = 3"]), reply([], "done"))
    assert cli("run", "-c", conv["id"], "go on").exit_code == 0
    shown, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert "iteration 3" in shown and "done" in shown
    assert TITLE_NUDGE not in shown
    out, err = events.communicate(timeout=60)
    nudges = [e for e in map(json.loads, out.splitlines()) if e["type"] == "nudge"]
    assert nudges and all(n["kind"] == "title" for n in nudges)
