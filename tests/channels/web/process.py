"""``cove web`` as a real process: started as a person starts it, its login URL read from
stderr (printed once the port listens), stopped with Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

LOGIN_URL = re.compile(r"^cove web: (http://localhost:(\d+)/login\?token=([A-Za-z0-9_-]{16,}))$")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start(
    tmp_path: Path, *args: str, token: str | None = None, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``cove web ARGS``; returns the process and the login URL it printed on stderr."""
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_SANDBOX_LIBRARIES": "0",
        "OPENAI_API_KEY": "sk-never-shown-to-the-browser",
        **(env or {}),
    }
    if token is not None:
        environment["COVE_WEB_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, "-m", "cove", "web", *args],
        env=environment,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline().rstrip("\n")  # printed once the socket listens
    assert LOGIN_URL.match(line), line
    return process, line.split(": ", 1)[1]


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=30)
    assert process.stderr is not None
    rest = process.stderr.read()
    process.stderr.close()
    assert code == 0, rest
