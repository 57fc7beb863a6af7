"""The listening socket of an HTTP server (``cove web``, ``cove serve``), bound before anything
is printed or started: a busy port is one error line, never a login URL that leads nowhere."""

from __future__ import annotations

import socket

from cove.errors import ListenError


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (port 0: a free one); nothing is served on
    it yet, but connections queue, so its address can be printed at once.

    Raises:
        ListenError: The address cannot be bound (in use, not this machine's, not permitted).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = (exc.strerror or str(exc)).lower()  # "address already in use"
        raise ListenError(host, port, reason) from exc
    return sock
