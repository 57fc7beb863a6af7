"""``cove serve`` as a real subprocess on a real database, against the fake model endpoint."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.openai_server import FakeOpenAI

FAKE_KEY = "sk-serve-test-NEVER-LOGGED-31337"
_URL = re.compile(r"^cove serve: http://localhost:(\d+)/(?:login\?token=([A-Za-z0-9_-]+))?")


def serve_env(tmp_path: Path, server: FakeOpenAI) -> dict[str, str]:
    """An environment aimed at ``tmp_path`` and the fake endpoint (the key is fake)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "COVE_DATA_DIR": str(tmp_path / "data"),
        "COVE_SANDBOX_LIBRARIES": "0",  # no data work: a zygote starts a second sooner
        "COVE_DB": str(tmp_path / "cove.db"),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": FAKE_KEY,
        "COVE_MODEL": "fake-model",
        "COVE_MAX_RETRIES": "1",
        "COVE_RETRY_BASE_DELAY_S": "0.01",
        "COVE_REQUEST_TIMEOUT_S": "120",
        "COVE_WORKER_POOL_SIZE": "1",
        "COVE_SERVE_PROCESSES": "1",  # one process unless a test asks for more
    }


class ServeProcess:
    """A running ``cove serve``; its stderr (the logs) is read by a thread into ``lines``."""

    def __init__(self, env: dict[str, str], *args: str, prefix: Sequence[str] = ()) -> None:
        """Start it with ``args``; ``prefix`` is a command it runs under (which must end by
        executing the rest, so the process is cove's)."""
        command = [sys.executable, "-m", "cove", "serve", "--port", "0", "--log-format", "json"]
        self.proc = subprocess.Popen(
            [*prefix, *command, *args],
            env=env,
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        url = self.wait_for(lambda line: _URL.match(line) is not None, timeout=60)
        match = _URL.match(url)
        assert match is not None
        self.port = int(match.group(1))
        self.base_url = f"http://127.0.0.1:{self.port}"
        #: The login token: printed in the login URL, or the configured COVE_WEB_TOKEN.
        self.token = match.group(2) or env["COVE_WEB_TOKEN"]

    @contextlib.asynccontextmanager
    async def client(self, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
        """An HTTP client logged in as a person does: the login URL, then the session cookie."""
        async with httpx.AsyncClient(base_url=self.base_url, **options) as client:
            login = await client.get(f"/login?token={self.token}")
            assert login.status_code == 303, login.text
            yield client

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Any, timeout: float) -> str:
        """The first stderr line ``predicate`` accepts, waiting for it (bounded)."""
        with self._changed:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(self.lines)
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError("cove serve ended:\n" + "\n".join(self.lines))
                if not self._changed.wait(timeout):
                    raise AssertionError("no such line in time:\n" + "\n".join(self.lines))

    def records(self) -> list[dict[str, Any]]:
        """The JSON log records written so far (every line but the URL must be one)."""
        records = []
        for line in self.lines:
            if _URL.match(line):
                continue
            records.append(json.loads(line))
        return records

    def stop(self) -> None:
        """Kill it if it still runs (a failed test must not leave it behind)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
