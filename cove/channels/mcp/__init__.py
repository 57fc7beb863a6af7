"""cove as an MCP server: ``cove mcp`` over stdio, and the same server over streamable HTTP at
``/mcp`` inside ``cove serve`` (behind its login and Host/Origin checks).

``server.py`` assembles the server (the SDK's ``MCPServer``) from the tools (``turns.py``:
``run_python`` and ``ask_cove``, which run turns; ``reads.py``: lists, variables, versions,
diff, search, fork) and the ``cove://`` resources (``resources.py``, ``uris.py``);
``follow.py`` follows a call's turn with progress and cancels it with the call; ``results.py``
shapes what a turn gives back; ``errors.py`` is the one mapping of cove's errors to MCP's;
``stdio.py`` and ``http.py`` are the two transports.
"""

from cove.channels.mcp.server import build_server

__all__ = ["build_server"]
