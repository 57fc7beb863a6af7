"""MCP as a channel of ``cove serve`` (the entry point ``mcp`` of the group ``cove.channels``):
streamable HTTP at ``/mcp`` of the service's HTTP server, behind its login."""

from __future__ import annotations

from starlette.routing import Route

from cove.channels.mcp.http import PATH, mcp_app
from cove.config import Settings
from cove.conversation import Conversations


class McpChannel:
    """cove's MCP server over the service's ``Conversations`` (its sessions live in the one
    process that runs it; its lifespan runs with the service's HTTP server)."""

    name = "mcp"

    def __init__(self, convs: Conversations, settings: Settings) -> None:
        # An exact path: the app sees the whole path, as it would served alone.
        self.routes = (Route(PATH, endpoint=mcp_app(convs)),)

    async def start(self) -> None:
        """Nothing to start: MCP serves once the HTTP server does."""

    async def stop(self) -> None:
        """Nothing to stop: its sessions end with the HTTP server's lifespan."""
