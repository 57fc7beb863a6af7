"""The MCP server over streamable HTTP, for ``cove serve`` to serve at ``/mcp``.

It has no access control of its own, on purpose: ``cove serve`` puts it behind the same
``Guard`` as everything else it serves (``cove.channels.web.security``): the login token
(``Authorization: Bearer <token>``, as MCP clients send it), the loopback ``Host`` names and
the ``Origin`` check on requests that change state — the DNS-rebinding protection the MCP
specification asks of local servers. The SDK's own Host/Origin check is therefore turned off:
it would answer to a different list of names than the rest of the server (a reverse proxy's
``--allow-host`` name, for one).
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from cove.channels.mcp.server import build_server
from cove.conversation import Conversations

#: Where ``cove serve`` answers MCP.
PATH = "/mcp"
#: A client that neither sends nor holds a stream for this long has its session ended.
SESSION_IDLE_S = 30 * 60.0


def mcp_app(convs: Conversations) -> Starlette:
    """The MCP server of ``convs`` as an ASGI app answering at ``PATH``.

    Its lifespan runs the SDK's session manager: whoever serves the app runs it (``cove
    serve``'s lifespan does). ``convs`` stays the caller's to close.
    """
    return build_server(convs).streamable_http_app(
        streamable_http_path=PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=SESSION_IDLE_S,
    )
