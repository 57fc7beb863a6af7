"""uvicorn's server, closing what its graceful shutdown leaves open.

When requests outlast ``timeout_graceful_shutdown``, uvicorn cancels them but leaves their
connections open: the sockets then outlive the server (and its event loop) until the garbage
collector finds them. This server closes them once its shutdown is done.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn


class Server(uvicorn.Server):
    """``uvicorn.Server`` whose shutdown closes every connection still open."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Shut down as uvicorn does, then close the connections it left open."""
        await super().shutdown(sockets)
        for connection in list(self.server_state.connections):
            connection.transport.close()
        await asyncio.sleep(0)  # the transports close their sockets on the next pass
