"""``cove list`` and ``cove search`` tell conversations apart: a conversation the model gave no
title is listed by the start of its first request, and every row says how its last turn ended
(running, done, failed, cancelled, interrupted), in the table and in ``--json``."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess, wait_for_requests
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers

REQUEST = "Compute the squares of the numbers from one to forty and tell me their sum, please"


def rows(listed: str) -> dict[str, list[str]]:
    """A piped table as {first cell: cells}."""
    header, *lines = listed.splitlines()
    return {cells[0]: cells for cells in (line.split("\t") for line in [header, *lines])}


def test_an_untitled_conversation_is_listed_by_the_start_of_its_first_request(
    cli: Cove, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["total = sum(n * n for n in range(1, 41))"], "{{total}}"))
    assert cli("run", REQUEST).exit_code == 0
    [conv] = cli.json("list")
    assert conv["title"] is None
    assert conv["label"].startswith("Compute the squares of the") and conv["label"].endswith("…")
    assert len(conv["label"]) < len(REQUEST)
    table = rows(cli("list").stdout)
    assert table[conv["id"][:12]][1] == conv["label"]
    assert "(untitled)" not in cli("list").stdout
    hits = cli("search", "squares").stdout
    assert conv["label"] in hits
    [hit] = cli.json("search", "squares")
    assert hit["label"] == conv["label"]
    # Once the model names it, the title is what every list shows.
    server.add_replies(reply(["n = 2"], "two", title="Sums of squares"))
    assert cli("run", "-c", conv["id"], "and then?").exit_code == 0
    [named] = cli.json("list")
    assert named["label"] == "Sums of squares"
    assert rows(cli("list").stdout)[conv["id"][:12]][1] == "Sums of squares"


def test_every_row_says_how_its_last_turn_ended(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["a = 1"], "one"))
    assert cli("run", "done well").exit_code == 0
    server.add_replies(reply(["b = 2"]))
    assert cli("run", "--max-iterations", "1", "never answers").exit_code == 3
    cancelled_id, held = _held(cli, proc_cli, server, "to be cancelled")
    held.send_signal(signal.SIGTERM)
    held.communicate(timeout=60)
    assert held.returncode == 5
    running_id, running = _held(cli, proc_cli, server, "still running")
    try:
        statuses = _statuses(cli)
        assert statuses[running_id] == "running"
        assert statuses[cancelled_id] == "cancelled"
        assert sorted(statuses.values()) == ["cancelled", "done", "max_iterations", "running"]
        table = rows(cli("list").stdout)
        assert table["id"][2] == "status"
        assert table[running_id[:12]][2] == "running"
        assert table[cancelled_id[:12]][2] == "cancelled"
    finally:
        os.kill(running.pid, signal.SIGKILL)  # dies holding its lease: the turn is interrupted
        running.communicate(timeout=30)
    assert _statuses(cli)[running_id] == "interrupted"
    assert rows(cli("list").stdout)[running_id[:12]][2] == "interrupted"


def _held(
    cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI, request: str
) -> tuple[str, subprocess.Popen[str]]:
    """A new conversation whose second turn stalls at the endpoint in another process."""
    server.add_replies(reply(["a = 1"], "first"))
    assert cli("run", request).exit_code == 0
    cid = str(cli.json("list")[0]["id"])
    server.add_faults(Fault.stall(120.0))
    proc_cli.env["COVE_REQUEST_TIMEOUT_S"] = "300"
    asked = len(server.requests)
    held = proc_cli.popen("run", "-c", cid, "slow one")
    wait_for_requests(server, asked + 1)  # the slow turn holds the conversation now
    return cid, held


def _statuses(cli: Cove) -> dict[str, Any]:
    return {c["id"]: c["last_status"] for c in cli.json("list")}
