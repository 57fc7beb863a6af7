"""``cove mcp``: cove as an MCP server on stdin/stdout, the way MCP clients (desktop
assistants, IDE agents) start local servers. The server is ``cove.channels.mcp``."""

from __future__ import annotations

import asyncio

from cove.channels.cli.base import command, examples, load_settings
from cove.channels.cli.extras import require


@command(
    "mcp",
    short_help="Serve cove to MCP clients over stdio (run by the client).",
    epilog=examples(
        "cove mcp                           what an MCP client's configuration runs",
        "cove --db ~/work.db mcp            on another database",
    ),
)
def mcp_command() -> int:
    """Serve cove to an MCP client on stdin and stdout (the client starts this command).

    The tools run Python in a conversation's sandbox (run_python, no model: the agent writes
    the code), ask cove's own model (ask_cove), list conversations and variables, show a
    variable's versions and diffs, search and fork; resources under cove://conversations hold
    transcripts and values. Every call that runs code is a turn of its conversation (channel
    mcp): watch it live with cove watch, cove tui or the web. Logs go to stderr. Over HTTP,
    the same server is at /mcp of cove serve --mcp.
    """
    require("mcp", "cove mcp")
    from cove.channels.mcp.stdio import quiet_logging, serve_stdio

    settings = load_settings()
    quiet_logging()
    code: int = asyncio.run(serve_stdio(settings))
    return code
