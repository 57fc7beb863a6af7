"""``cove web`` as a person starts it: a real process, its printed URL, a login when needed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start(
    tmp_path: Path, *args: str, token: str | None = None
) -> tuple[subprocess.Popen[str], str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "OPENAI_API_KEY": "sk-never-shown-to-the-browser",
    }
    if token is not None:
        env["COVE_WEB_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, "-m", "cove", "web", *args],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # printed before the server starts listening
    assert line.startswith("cove web: http://"), line
    return process, line.split(": ", 1)[1].strip()


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=30)
    assert process.stderr is not None
    rest = process.stderr.read()
    process.stderr.close()
    assert code == 0, rest


def get_when_up(url: str, client: httpx.Client) -> httpx.Response:
    for _ in range(200):  # the process prints its URL just before it binds
        try:
            return client.get(url)
        except httpx.ConnectError:
            threading.Event().wait(0.05)
    raise AssertionError(f"{url} never answered")


def test_cove_web_serves_loopback_without_login(tmp_path: Path) -> None:
    port = free_port()
    process, url = start(tmp_path, "--port", str(port))
    try:
        assert url == f"http://localhost:{port}/"
        with httpx.Client() as client:
            page = get_when_up(f"http://127.0.0.1:{port}/", client)
            assert page.status_code == 200 and "sk-never-shown" not in page.text
    finally:
        stop(process)


def test_cove_web_with_a_token_needs_the_login_url(tmp_path: Path) -> None:
    port = free_port()
    token = "token-for-the-cli-test-0123456789"
    process, url = start(tmp_path, "--port", str(port), token=token)
    try:
        assert url == f"http://localhost:{port}/login?token={token}"
        with httpx.Client(follow_redirects=True) as client:
            assert get_when_up(f"http://127.0.0.1:{port}/", client).status_code == 401
            assert client.get(url.replace("localhost", "127.0.0.1")).status_code == 200
            assert client.get(f"http://127.0.0.1:{port}/api/conversations").status_code == 200
    finally:
        stop(process)
