"""While the model endpoint is being retried, the CLI says so: ``retrying (1 of 1)`` in the
progress line of ``cove run`` on a terminal, in ``cove chat``, and as a ``model_retry`` event."""

from __future__ import annotations

import json

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.channels.cli.terminal import on_terminal
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers


def test_run_events_and_chat_say_the_endpoint_is_retried(cli: Cove, server: FakeOpenAI) -> None:
    server.add_faults(Fault.server_error(503))
    server.add_replies(reply([], "made it"))
    ran = cli("run", "--events", "hello")
    assert ran.exit_code == 0, ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines()]
    [retry] = [e for e in events if e["type"] == "model_retry"]
    assert (retry["attempt"], retry["of"], retry["turn"], retry["iteration"]) == (1, 1, 1, 1)
    assert retry["reason"] == "server error (HTTP 503)"
    server.add_faults(Fault.rate_limit(retry_after=0.01))
    server.add_replies(reply([], "again"))
    chatted = cli("chat", stdin="hello again\n")
    assert chatted.exit_code == 0, chatted.stderr
    assert "retrying (1 of 1): rate limited (HTTP 429)" in chatted.stdout


def test_run_on_a_terminal_shows_the_retry_in_its_progress_line(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_faults(Fault.server_error(502))
    server.add_replies(reply([], "made it"))
    code, terminal, piped = on_terminal(proc_cli, "run", "hello", stream="stderr")
    assert code == 0 and piped == "made it\n"
    assert "retrying (1 of 1): server error (HTTP 502)" in terminal


def test_watch_shows_a_retry_of_a_turn_another_process_runs(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["a = 1"], "first"))
    assert cli("run", "start").exit_code == 0
    [conv] = cli.json("list")
    watcher = proc_cli.popen("watch", conv["id"], "--once")
    assert watcher.stderr is not None and "watching" in watcher.stderr.readline()
    server.add_faults(Fault.server_error(503))
    server.add_replies(reply([], "second"))
    ran = proc_cli("run", "-c", conv["id"], "again")  # another process runs the turn
    assert ran.returncode == 0, ran.stderr
    shown, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert "retrying (1 of 1): server error (HTTP 503)" in shown
    assert shown.index("iteration 1") < shown.index("retrying") < shown.index("second")
