"""The ``cove`` command as a real subprocess on a real database, against the fake endpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

FAKE_KEY = "sk-cli-test-NEVER-PRINTED-777"


def run_cove(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m cove ARGS`` with exactly ``env`` as its environment."""
    return subprocess.run(
        [sys.executable, "-m", "cove", *args],
        env=env,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


class Cli:
    """Runs ``python -m cove`` with an environment aimed at a temp dir and the fake endpoint."""

    def __init__(self, tmp_path: Path, server: FakeOpenAI) -> None:
        self.db = tmp_path / "cove.db"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "COVE_DATA_DIR": str(tmp_path / "data"),
            "COVE_DB": str(self.db),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": FAKE_KEY,
            "COVE_MODEL": "fake-model",
            "COVE_MAX_RETRIES": "1",
            "COVE_RETRY_BASE_DELAY_S": "0.01",
            "COVE_REQUEST_TIMEOUT_S": "5",
            "COVE_WORKER_POOL_SIZE": "1",
        }

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = run_cove(self.env, *args, stdin=stdin)
        assert FAKE_KEY not in result.stdout + result.stderr
        return result

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "cove", *args],
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def json(self, *args: str) -> Any:
        result = self(*args, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def cli(tmp_path: Path, server: FakeOpenAI) -> Cli:
    return Cli(tmp_path, server)


def test_run_prints_the_answer_and_continues_a_conversation(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(
        reply(["total = sum([1, 2, 3])"], "The total is {{total}}.", title="Small sums"),
        reply(["total = total * 10"], "Now {{total}}."),
    )
    first = cli("run", "add 1, 2 and 3")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "The total is 6."
    [conv] = cli.json("list")
    assert conv["title"] == "Small sums"
    second = cli("run", "-c", conv["id"][:8], "times ten")
    assert second.stdout.strip() == "Now 60."
    versions = cli.json("vars", conv["id"], "total")
    assert [v["version"] for v in versions] == [1, 2]


def test_run_json_and_events(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 2 ** 10"], "{{x}}"), reply(["y = 1"], "one"))
    result = cli.json("run", "power")
    assert result["status"] == "done" and result["answer"] == "1024"
    assert result["conversation_id"] and result["iterations"] == 1
    events = cli("run", "--events", "again")
    kinds = [json.loads(line)["type"] for line in events.stdout.splitlines()]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_finished"
    assert {"iteration_started", "model_reply", "block_finished", "vars_changed"} <= set(kinds)


def test_exit_codes(cli: Cli, server: FakeOpenAI) -> None:
    server.respond_with(reply(["n = 1"]))
    ran_out = cli("run", "--max-iterations", "2", "loop forever")
    assert ran_out.returncode == 3
    assert "max_iterations" in ran_out.stderr
    assert cli("run").returncode == 2
    assert cli("show", "does-not-exist").returncode == 7
    dead = dict(cli.env, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    failed = run_cove(dead, "run", "hi")
    assert failed.returncode == 1
    assert "127.0.0.1:9" in failed.stderr


def test_inspection_commands(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(
        reply(
            ["def square(v):\n    return v * v", "area = square(12)"],
            "Area {{area}}",
            title="Squares",
        )
    )
    assert cli("run", "area of a 12 square").returncode == 0
    [conv] = cli.json("list")
    cid = conv["id"]
    shown = cli("show", cid[:6])
    assert "def square" in shown.stdout and "Area 144" in shown.stdout
    assert "area v1" in shown.stdout
    exact = cli("show", cid, "--prompts")
    assert "ONE JSON object" in exact.stdout and "[iteration 1/" in exact.stdout
    transcript = cli.json("show", cid)
    iteration = transcript["turns"][0]["iterations"][0]
    assert json.loads(iteration["raw_reply"])["title"] == "Squares"
    assert iteration["context_message"].startswith("[iteration 1/")
    variables = cli("vars", cid)
    assert "area" in variables.stdout and "square" in variables.stdout
    hits = cli.json("search", "square")
    assert hits and hits[0]["conversation_id"] == cid
    markdown = cli("export", cid, "--format", "md")
    assert markdown.stdout.startswith("# Squares") and "```python" in markdown.stdout
    exported = json.loads(cli("export", cid, "--format", "json").stdout)
    assert exported["conversation"]["id"] == cid


def test_fork_delete_and_replay(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(
        reply(["import random\nr = random.random()"], "{{r}}"), reply(["r2 = r * 2"], "{{r2}}")
    )
    assert cli("run", "roll").returncode == 0
    [conv] = cli.json("list")
    replayed = cli("replay", conv["id"])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "matched" in replayed.stdout
    forked = cli.json("fork", conv["id"], "--at", "1")
    assert forked["parent_id"] == conv["id"]
    assert cli("run", "-c", forked["id"], "double").returncode == 0
    refused = cli("delete", forked["id"])
    assert refused.returncode == 2
    assert cli("delete", conv["id"], "--yes").returncode == 1  # a fork depends on it
    assert cli("delete", forked["id"], "--yes").returncode == 0
    assert cli("delete", conv["id"], "--yes").returncode == 0
    assert cli.json("list") == []


def test_second_process_on_the_same_conversation_is_busy(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(reply(["a = 1"], "first"))
    assert cli("run", "start").returncode == 0
    [conv] = cli.json("list")
    server.add_faults(Fault.stall(3.0))
    server.add_replies(reply(["b = 2"], "slow"))
    slow = cli.popen("run", "-c", conv["id"], "slow one")
    deadline = time.monotonic() + 20
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    busy = cli("run", "-c", conv["id"], "intruder")
    assert busy.returncode == 6
    assert "busy" in busy.stderr
    out, err = slow.communicate(timeout=30)
    assert slow.returncode == 0, err
    assert out.strip() == "slow"


def test_kill_9_mid_turn_leaves_an_interrupted_turn_and_the_conversation_continues(
    cli: Cli, server: FakeOpenAI
) -> None:
    def first(body: dict[str, Any]) -> str:
        server.add_faults(Fault.stall(60.0))
        return reply(["kept = [1, 2, 3]"])

    server.add_replies(first, reply(["never = 1"]))
    proc = cli.popen("run", "--events", "long task")
    assert proc.stdout is not None
    started = json.loads(proc.stdout.readline())
    cid = started["conversation_id"]
    deadline = time.monotonic() + 20
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    transcript = cli.json("show", cid)
    turn = transcript["turns"][0]
    assert turn["status"] == "interrupted"
    assert turn["iterations"][0]["status"] == "ok"
    kept = cli.json("vars", cid)
    assert [v["preview"] for v in kept if v["name"] == "kept"] == ["[1, 2, 3]"]
    server.add_replies(reply(["len(kept)"], "{{kept}}"))
    resumed = cli("run", "-c", cid, "continue")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "[1, 2, 3]"


def test_demo_runs_offline(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_WORKER_POOL_SIZE": "1",
    }
    result = run_cove(env, "demo")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fork" in result.stdout and "replay" in result.stdout
    assert (tmp_path / "data" / "cove.db").exists()


def test_doctor_reports_each_check(cli: Cli, server: FakeOpenAI) -> None:
    result = cli("doctor")
    assert result.returncode == 0, result.stdout
    for name in ("configuration", "database", "sandbox", "model endpoint"):
        assert name in result.stdout
    dead = dict(cli.env, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    failing = run_cove(dead, "doctor")
    assert failing.returncode == 1 and "fix:" in failing.stdout


def test_chat_reads_lines_until_end_of_input(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(reply(["x = 5"], "x is {{x}}"), reply(["x * 2"], "doubled {{x}}"))
    result = cli("chat", stdin="set x\n\nuse x\n")
    assert result.returncode == 0, result.stderr
    assert "x is 5" in result.stdout and "doubled 5" in result.stdout
    [conv] = cli.json("list")
    assert conv["turn_count"] == 2
    assert f"conversation {conv['id']} saved" in result.stdout


def wait_for_requests(server: FakeOpenAI, count: int) -> None:
    deadline = time.monotonic() + 20
    while len(server.requests) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.requests) >= count


SPIN = reply([{"code": "while True:\n    pass", "timeout_s": 60}])  # type: ignore[list-item]


def test_ctrl_c_cancels_a_run_and_exits_with_the_cancelled_code(
    cli: Cli, server: FakeOpenAI
) -> None:
    server.add_replies(SPIN)
    cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = cli.popen("run", "spin")
    wait_for_requests(server, 1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 5, err
    assert "cancelled" in err
    [conv] = cli.json("list")
    assert cli.json("show", conv["id"])["turns"][0]["status"] == "cancelled"


def test_ctrl_c_in_chat_cancels_the_turn_and_the_chat_goes_on(cli: Cli, server: FakeOpenAI) -> None:
    server.add_replies(SPIN, reply(["after = 1"], "still here"))
    cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cove", "chat"],
        env=cli.env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write("spin\n")
    proc.stdin.flush()
    wait_for_requests(server, 1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    proc.stdin.write("next\n")
    proc.stdin.flush()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "cancelled" in out and "still here" in out


def test_run_without_an_endpoint_says_how_to_configure_one(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
    }
    result = run_cove(env, "run", "hello")
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr and "cove demo" in result.stderr
    listed = run_cove(env, "list", "--json")
    assert json.loads(listed.stdout) == []  # nothing half-made was left behind


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(cli: Cli) -> None:
    cli.db.write_bytes(b"my thesis, not a database\n" * 100)
    result = cli("list")
    assert result.returncode == 9
    assert "not a cove database" in result.stderr
    assert cli.db.read_bytes() == b"my thesis, not a database\n" * 100


def test_a_database_from_a_newer_cove_is_refused(cli: Cli) -> None:
    import asyncio
    import sqlite3

    from cove.persistence.store import Store

    async def make() -> None:
        async with Store.open(cli.db):
            pass

    asyncio.run(make())
    with sqlite3.connect(cli.db) as db:
        db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'x', 0)")
    result = cli("list")
    assert result.returncode == 9
    assert "99" in result.stderr and "upgrade cove" in result.stderr
