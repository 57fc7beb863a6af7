"""``cove web`` and ``cove serve`` on a port another process holds: no URL, one line naming the
port, and the exit code that means "cannot listen" (10), not one a turn would give."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # cove serve and cove processes

EXIT_CANNOT_LISTEN = 10


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port this test holds (bound and listening) while the command tries it."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("command", ["web", "serve"])
def test_a_busy_port_is_one_clear_line_and_its_own_exit_code(
    tmp_path: Path, held_port: int, command: str
) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_SANDBOX_LIBRARIES": "0",
    }
    result = subprocess.run(
        [sys.executable, "-m", "cove", command, "--port", str(held_port)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == EXIT_CANNOT_LISTEN, result.stderr
    assert "http://" not in result.stderr + result.stdout  # no URL: nothing is served
    errors = [line for line in result.stderr.splitlines() if line.startswith("cove:")]
    assert errors == [f"cove: cannot listen on 127.0.0.1:{held_port}: address already in use"]
    assert "Traceback" not in result.stderr
