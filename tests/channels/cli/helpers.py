"""Running ``cove`` in tests: in-process through click's ``CliRunner`` (fast, most tests) or as a
real subprocess (exit codes on signals, terminals, concurrent processes).

Both run the real entry point on a real database under ``tmp_path`` against the fake endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from cove.channels.cli import cove
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

FAKE_KEY = "sk-cli-test-NEVER-PRINTED-777"


def environment(tmp_path: Path, server: FakeOpenAI | None) -> dict[str, str]:
    """The whole environment of a ``cove`` run: a temp home and data dir, the fake endpoint."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_DB": str(tmp_path / "cove.db"),
        "COVE_WORKER_POOL_SIZE": "1",
        # The data libraries cost every zygote a second or more: on only where a test needs them.
        "COVE_SANDBOX_LIBRARIES": "0",
    }
    if server is not None:
        env |= {
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": FAKE_KEY,
            "COVE_MODEL": "fake-model",
            "COVE_MAX_RETRIES": "1",
            "COVE_RETRY_BASE_DELAY_S": "0.01",
            "COVE_REQUEST_TIMEOUT_S": "5",
        }
    return env


class Cove:
    """``cove ARGS`` in this process, with exactly ``env`` as the environment cove reads."""

    def __init__(self, tmp_path: Path, server: FakeOpenAI | None) -> None:
        self.db = tmp_path / "cove.db"
        self.env = environment(tmp_path, server)

    def __call__(self, *args: str, stdin: str | bytes | None = None) -> Result:
        # Variables of the test process that cove would read are removed for the run.
        unset: dict[str, str | None] = {
            k: None
            for k in os.environ
            if k.startswith(("COVE_", "OPENAI_", "XDG_")) and k not in self.env
        }
        result = CliRunner().invoke(cove, list(args), input=stdin, env={**unset, **self.env})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert FAKE_KEY not in result.stdout + result.stderr
        return result

    def json(self, *args: str) -> Any:
        result = self(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


class CoveProcess:
    """``python -m cove ARGS`` as a real process, with exactly ``env`` as its environment."""

    def __init__(self, tmp_path: Path, server: FakeOpenAI | None) -> None:
        self.db = tmp_path / "cove.db"
        self.env = environment(tmp_path, server)

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "cove", *args],
            env=self.env,
            capture_output=True,
            text=True,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            timeout=120,
        )
        assert FAKE_KEY not in result.stdout + result.stderr
        return result

    def popen(self, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
        options: dict[str, Any] = {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.PIPE,
        }
        return subprocess.Popen(
            [sys.executable, "-m", "cove", *args],
            env=self.env,
            text=True,
            **(options | kwargs),
        )

    def json(self, *args: str) -> Any:
        result = self(*args, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll ``condition`` until it holds (for state only another process can change)."""
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pause.wait(0.02)


def wait_for_requests(server: FakeOpenAI, count: int) -> None:
    """Wait until the fake endpoint has been asked ``count`` times."""
    wait_until(lambda: len(server.requests) >= count, f"{count} model request(s)")


def read_events_until(proc: subprocess.Popen[str], kind: str, **fields: Any) -> Mapping[str, Any]:
    """Read ``--events`` lines until an event of ``kind`` with ``fields``; return it."""
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event["type"] == kind and all(event.get(k) == v for k, v in fields.items()):
            return event
    raise AssertionError(f"the process ended before a {kind} event")


def hold_conversation(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> tuple[str, subprocess.Popen[str]]:
    """A conversation whose second turn runs in another process and holds it until stopped.

    The first turn runs to the end; the second stalls at the endpoint (no client timeout and no
    retry ends the stall), so the returned process holds the conversation's lease until the test
    signals it.
    """
    server.add_replies(reply(["a = 1"], "first"))
    assert proc_cli("run", "start").returncode == 0
    [conv] = proc_cli.json("list")
    server.add_faults(Fault.stall(120.0))
    proc_cli.env["COVE_REQUEST_TIMEOUT_S"] = "300"
    slow = proc_cli.popen("run", "-c", conv["id"], "slow one")
    wait_for_requests(server, 2)  # the slow turn holds the conversation now
    return str(conv["id"]), slow
