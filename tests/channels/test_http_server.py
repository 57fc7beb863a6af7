"""The HTTP server closes the connections its graceful shutdown had to give up on."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from cove.channels.http_server import Server


async def endless(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        yield b"first\n"
        await asyncio.Event().wait()  # never ends on its own

    return StreamingResponse(body())


def test_a_response_cut_by_the_shutdown_has_its_connection_closed() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(
        Starlette(routes=[Route("/", endless)]),
        lifespan="off",
        log_config=None,
        log_level="critical",
        timeout_graceful_shutdown=0.2,
    )
    server = Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        received = b""
        while b"first" not in received:
            received += client.recv(4096)
        server.should_exit = True
        thread.join(timeout=10)
        assert not thread.is_alive()
        client.settimeout(5)
        rest = b""
        while chunk := client.recv(4096):  # the server's end closed: the read ends
            rest += chunk
        assert b"first" not in rest
