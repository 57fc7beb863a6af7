"""Reaching cove's MCP server the ways a client does: the SDK's in-memory client over a
``Conversations`` of this process, ``cove mcp`` as a subprocess over stdio, ``cove serve --mcp``
over streamable HTTP; and what the tests read from the results."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from cove.events import Event
from tests.channels.cli.helpers import environment
from tests.fakes.openai_server import FakeOpenAI

#: The login token ``cove serve`` is configured with in these tests (16+ characters).
TOKEN = "mcp-test-token-0123456789"
#: A spinning block runs until it is stopped: far longer than any test may take.
SPIN = "while True:\n    spins += 1"


def mcp_env(tmp_path: Path, server: FakeOpenAI | None = None) -> dict[str, str]:
    """The environment of a ``cove mcp`` or ``cove serve`` process on ``tmp_path``: one
    worker, no data libraries, blocks allowed to run long enough to be cancelled."""
    return environment(tmp_path, server) | {
        "COVE_BLOCK_TIMEOUT_MAX_S": "600",
        "COVE_REQUEST_TIMEOUT_S": "60",
        "COVE_WEB_TOKEN": TOKEN,
    }


def stdio(env: dict[str, str]) -> Client:
    """An SDK client that starts ``cove mcp`` with exactly ``env`` added to a bare environment."""
    return Client(
        StdioServerParameters(command=sys.executable, args=["-m", "cove", "mcp"], env=env)
    )


@contextlib.asynccontextmanager
async def over_http(url: str, token: str | None = TOKEN) -> AsyncIterator[Client]:
    """An SDK client of the MCP server at ``url`` sending ``token`` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def text(result: CallToolResult) -> str:
    """The text of a tool's result (its first content block)."""
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


def data(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a tool's result."""
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def run(
    client: Client, code: str, conversation: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Call ``run_python``; its structured result."""
    arguments: dict[str, Any] = {"code": code, **extra}
    if conversation is not None:
        arguments["conversation"] = conversation
    return data(await client.call_tool("run_python", arguments))


class Spinning:
    """A ``run_python`` call spinning in its block, started in a task: ``started`` is set when
    the server reports the block running (a progress notification)."""

    def __init__(self, client: Client, conversation: str) -> None:
        self.started = asyncio.Event()
        self.task = asyncio.create_task(
            client.call_tool(
                "run_python",
                {"code": SPIN, "conversation": conversation, "timeout_s": 600},
                progress_callback=self._progress,
            )
        )

    async def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        if message is not None and "running block" in message:
            self.started.set()

    async def running(self) -> None:
        """Wait until the block runs (or the call ended, which the test then sees)."""
        ended = asyncio.ensure_future(asyncio.shield(self.task))
        waiting = asyncio.ensure_future(self.started.wait())
        await asyncio.wait([ended, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        ended.cancel()
        assert self.started.is_set(), f"the call ended before its block ran: {self.task.result()}"

    async def cancel(self) -> None:
        """Cancel the call as a client does (the task awaiting it)."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def until(watched: AsyncIterator[Event], kind: type[Event]) -> AsyncIterator[Event]:
    """The events of a watch stream up to the first of ``kind`` (the stream goes on after)."""
    async for event in watched:
        yield event
        if isinstance(event, kind):
            return
