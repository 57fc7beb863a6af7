"""HAProxy running ``deploy/haproxy.cfg`` as it is, in front of nodes on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx
import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CONFIG = DEPLOY / "haproxy.cfg"
TELEGRAM_CONFIG = DEPLOY / "haproxy-telegram.cfg"


def require_haproxy() -> str:
    """The ``haproxy`` binary; the test is skipped without it (failed in CI, which installs
    it)."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("haproxy is not installed: .ci/run installs it")
        pytest.skip("haproxy is not installed (Debian: apt-get install haproxy)")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Proxy:
    """``haproxy -f deploy/haproxy.cfg`` with ``COVE_NODE1``/``COVE_NODE2`` at two node ports;
    with ``hook_ports`` (the nodes' Telegram webhook listeners), ``deploy/haproxy-telegram.cfg``
    too, its frontend at ``telegram_url``."""

    def __init__(
        self,
        binary: str,
        node_ports: tuple[int, int],
        hook_ports: tuple[int, int] | None = None,
    ) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "COVE_PROXY_BIND": f"127.0.0.1:{self.port}",
            "COVE_NODE1": f"127.0.0.1:{node_ports[0]}",
            "COVE_NODE2": f"127.0.0.1:{node_ports[1]}",
        }
        files = ["-f", str(CONFIG)]
        self.telegram_url = ""
        if hook_ports is not None:
            telegram = _free_port()
            self.telegram_url = f"http://127.0.0.1:{telegram}"
            env |= {
                "COVE_TELEGRAM_BIND": f"127.0.0.1:{telegram}",
                "COVE_HOOK1": f"127.0.0.1:{hook_ports[0]}",
                "COVE_HOOK2": f"127.0.0.1:{hook_ports[1]}",
            }
            files += ["-f", str(TELEGRAM_CONFIG)]
        self.proc = subprocess.Popen(
            [binary, "-db", *files],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_until_up(self, nodes: int = 2, timeout: float = 60) -> None:
        """Until the proxy has routed requests to ``nodes`` nodes (its health checks passed)."""
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "haproxy stopped"
            try:
                answer = httpx.get(f"{self.base_url}/readyz", timeout=5)
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 200:
                seen.add(answer.headers["x-cove-node"])
                if len(seen) >= nodes:
                    return
            time.sleep(0.1)
        raise AssertionError(f"haproxy did not route to {nodes} nodes: {seen}")

    def __enter__(self) -> Proxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
