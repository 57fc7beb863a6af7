"""Several ``cove serve`` nodes over one PostgreSQL database, as real processes on loopback.

Each node has its own data directory (its workspaces and figures are its own, as on separate
machines) and the same database, login token and lease TTL. Clients use the token as a bearer
(a session cookie belongs to the node that issued it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.channels.serve.process import ServeProcess, serve_env
from tests.fakes.openai_server import FakeOpenAI, Fault

TOKEN = "nodes-test-token-0123456789abcdef"
BEARER = {"authorization": f"Bearer {TOKEN}"}


def node_env(tmp_path: Path, name: str, fake: FakeOpenAI, url: str, **extra: str) -> dict[str, str]:
    """The environment of node ``name``: its own folder, the shared database and token."""
    home = tmp_path / name
    home.mkdir(exist_ok=True)
    env = serve_env(home, fake) | {"COVE_DB": url, "COVE_WEB_TOKEN": TOKEN}
    return env | extra


def start_node(
    tmp_path: Path,
    name: str,
    fake: FakeOpenAI,
    url: str,
    *,
    host: str | None = None,
    **extra: str,
) -> ServeProcess:
    """``cove serve --web`` as node ``name``; with ``host``, in a UTS namespace of its own
    under that host name, so the other nodes see it as a node on another machine (its lease
    owner id names that host: its death is not seen, its lease must lapse)."""
    return ServeProcess(node_env(tmp_path, name, fake, url, **extra), "--web", prefix=on_host(host))


def on_host(host: str | None) -> list[str]:
    """The command a node runs under to have the host name ``host`` (a UTS namespace of its
    own; root): its lease owner ids name that host. None: this host's name."""
    if host is None:
        return []
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host]


def client(base_url: str) -> httpx.AsyncClient:
    """A script's client of a node or of the proxy (the token as a bearer)."""
    return httpx.AsyncClient(base_url=base_url, headers=BEARER, timeout=60)


def passing() -> Fault:
    """A fault that lets its request through at once (a placeholder in the fault queue)."""
    opened = threading.Event()
    opened.set()
    return Fault.gate(opened)


async def model_calls(fake: FakeOpenAI, count: int) -> None:
    """Wait until the fake model has received ``count`` requests (another process's progress)."""
    while len(fake.requests) < count:  # noqa: ASYNC110
        await asyncio.sleep(0.02)


class Watcher:
    """A conversation's SSE stream read in the background; ``events`` grows as they come."""

    def __init__(self, http: httpx.AsyncClient, cid: str) -> None:
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(http, cid))

    async def _read(self, http: httpx.AsyncClient, cid: str) -> None:
        url = f"/api/conversations/{cid}/events?after=0"
        async with http.stream("GET", url, timeout=httpx.Timeout(60, read=None)) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    async with self._changed:
                        self.events.append(json.loads(line[6:]))
                        self._changed.notify_all()

    async def wait_for(self, type_: str, **fields: Any) -> dict[str, Any]:
        """The first event of ``type_`` whose fields include ``fields``, waiting for it."""
        async with self._changed:
            while True:
                for event in self.events:
                    if event["type"] == type_ and all(event.get(k) == v for k, v in fields.items()):
                        return event
                if self._task.done():
                    self._task.result()
                    raise AssertionError(f"the stream ended before a {type_}: {self.events}")
                await self._changed.wait()

    async def aclose(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def finished(http: httpx.AsyncClient, cid: str, request: str) -> dict[str, Any]:
    """Follow the conversation until the turn asked ``request`` finished; its ``turn_finished``
    event (the stream starts at the conversation's beginning: nothing can be missed)."""
    watcher = Watcher(http, cid)
    try:
        started = await watcher.wait_for("turn_started", request=request)
        return await watcher.wait_for("turn_finished", turn_id=started["turn_id"])
    finally:
        await watcher.aclose()


async def send(http: httpx.AsyncClient, cid: str, text: str) -> httpx.Response:
    """Send a message; the response (202 when its turn started)."""
    return await http.post(f"/api/conversations/{cid}/messages", json={"text": text})


async def rows(url: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    """The rows of ``query`` on the shared database, read directly."""
    conn = await asyncpg.connect(url)
    try:
        return [tuple(row) for row in await conn.fetch(query, *args)]
    finally:
        await conn.close()


def kill(node: ServeProcess) -> None:
    """SIGKILL the node and reap it (a zombie would still count as alive)."""
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait(timeout=30)


@contextlib.asynccontextmanager
async def nodes(*started: ServeProcess) -> AsyncIterator[tuple[ServeProcess, ...]]:
    """Stop every node at the end, whatever happened."""
    try:
        yield started
    finally:
        for node in started:
            node.stop()
