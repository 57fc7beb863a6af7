"""Run the web app on a real uvicorn server on loopback, in the test's loop or in a thread,
behind the same ``Guard`` as ``cove web`` (login token ``TOKEN``): clients log in as a person
does, with ``login`` (the login URL, then the session cookie)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from cove.channels.web.security import Guard

TOKEN = "the-web-tests-login-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}  # how a script authenticates


def _config(
    app: ASGIApp, bind: str = "127.0.0.1", allow_hosts: tuple[str, ...] = ()
) -> uvicorn.Config:
    """The app behind the guard of a server bound to ``bind`` (it listens on loopback)."""
    guarded = Guard(app, TOKEN, bind=bind, allow_hosts=allow_hosts)
    return uvicorn.Config(
        guarded, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
    )


async def login(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Log ``client`` in with the login URL; it keeps the session cookie."""
    response = await client.get(f"/login?token={TOKEN}")
    assert response.status_code == 303, response.text
    return client


def _port(server: uvicorn.Server) -> int:
    port: int = server.servers[0].sockets[0].getsockname()[1]
    return port


@contextlib.asynccontextmanager
async def served(
    app: ASGIApp, *, bind: str = "127.0.0.1", allow_hosts: tuple[str, ...] = ()
) -> AsyncIterator[str]:
    """Serve ``app`` in this event loop; yields its base URL.

    ``bind`` is the address the guard believes it is bound to (``0.0.0.0``: any ``Host``).
    """
    server = uvicorn.Server(_config(app, bind, allow_hosts))
    task = asyncio.create_task(server.serve())
    while not server.started:  # uvicorn offers no event for "listening"
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{_port(server)}"
    finally:
        server.should_exit = True
        await task


@contextlib.contextmanager
def served_in_thread(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` from a thread with its own loop (for the synchronous browser tests)."""
    server = uvicorn.Server(_config(app))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    ready = threading.Event()
    while not server.started and thread.is_alive():
        ready.wait(0.01)
    if not server.started:
        raise RuntimeError("the web server did not start")
    try:
        yield f"http://127.0.0.1:{_port(server)}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


async def sse_events(
    client: httpx.AsyncClient, url: str, *, until: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Read an SSE stream until an event of type ``until``; each event gets its ``id``."""
    events: list[dict[str, Any]] = []
    async with client.stream("GET", url, headers=headers or {}) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        current: dict[str, Any] = {}
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("data: "):
                current.update(json.loads(line[6:]))
            elif line == "" and "type" in current:
                events.append(current)
                if current["type"] == until:
                    return events
                current = {}
    return events
