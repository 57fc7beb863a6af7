"""``cove mcp``: the MCP server over stdio, the composition root of a process an MCP client
starts (desktop assistants, IDE agents).

The client speaks JSON-RPC on the process's stdin and stdout; while the server runs, the SDK
points file descriptors 0 and 1 away from the wire, so nothing else (a worker, a stray print)
can write into it, and logs go to stderr. The server ends when the client closes stdin, or on
SIGTERM or SIGINT: calls still running are cancelled (their turns recorded ``cancelled``), the
workers stop and the database closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from cove.channels.mcp.server import build_server
from cove.config import Settings
from cove.conversation import Conversations, LLMFactory

log = logging.getLogger("cove.mcp")


def quiet_logging() -> None:
    """Warnings and errors on stderr, one line each; stdout carries the protocol alone.

    Set before the SDK's server is built, whose own set-up then leaves the handlers be.
    """
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="cove mcp: %(levelname)s %(name)s: %(message)s",
        force=True,
    )


async def serve_stdio(settings: Settings, llm_factory: LLMFactory | None = None) -> int:
    """Serve MCP on stdin/stdout until the client closes stdin or a stop signal; returns 0."""
    loop = asyncio.get_running_loop()
    async with Conversations.open(settings, llm_factory=llm_factory) as convs:
        if convs.database_created:
            log.warning("created a new database at %s", convs.database_path)
        serving = asyncio.create_task(build_server(convs).run_stdio_async())
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, serving.cancel)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
    return 0
