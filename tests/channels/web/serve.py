"""Run the web app on a real uvicorn server on loopback, in the test's loop or in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette


def _config(app: Starlette) -> uvicorn.Config:
    return uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
    )


def _port(server: uvicorn.Server) -> int:
    port: int = server.servers[0].sockets[0].getsockname()[1]
    return port


@contextlib.asynccontextmanager
async def served(app: Starlette) -> AsyncIterator[str]:
    """Serve ``app`` in this event loop; yields its base URL."""
    server = uvicorn.Server(_config(app))
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
def served_in_thread(app: Starlette) -> Iterator[str]:
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
