"""The service's HTTP side: one app (operations endpoints + the channels' routes), one uvicorn
server running inside the service's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cove.channels.serve import ops
from cove.channels.serve.affinity import Affinity, Peers, Placement
from cove.channels.serve.logs import PROCESS, REQUEST_ID
from cove.channels.web.security import Guard

log = logging.getLogger("cove.serve.http")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class RequestContext:
    """Gives each request an id (a sane ``X-Request-ID`` or a new one) for every log line it
    causes, returns it as ``X-Request-ID`` and logs one access line: method, path (never the
    query string, which may carry a login token), status and time. One of several processes
    also says which it is (``X-Cove-Process``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex[:16]
        token = REQUEST_ID.set(request_id)
        started, status = time.perf_counter(), 0

        process = PROCESS.get()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
                # A forwarded answer already names the process that answered it.
                if process is not None and not any(k == b"x-cove-process" for k, _ in headers):
                    headers.append((b"x-cove-process", str(process).encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            fields = {"method": scope["method"], "path": scope["path"], "status": status}
            fields["ms"] = round((time.perf_counter() - started) * 1000, 1)
            level = logging.DEBUG if scope["path"] in ("/healthz", "/metrics") else logging.INFO
            log.log(level, "request", extra={"fields": fields})
            REQUEST_ID.reset(token)


class Draining:
    """While the service stops, refuses every change (a send above all) with 503."""

    def __init__(self, app: ASGIApp, state: ops.OpsState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.state.draining and scope["method"] in _CHANGES:
            body = b'{"error": "cove is shutting down and takes no new turns"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"retry-after", b"5"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class Access:
    """Who may use the service's HTTP side: the login token and the ``Host`` names served."""

    token: str = field(repr=False)
    bind: str = "127.0.0.1"  # the address bound: a loopback one restricts ``Host``
    allow_hosts: tuple[str, ...] = ()


def build_app(
    state: ops.OpsState,
    routes: Sequence[BaseRoute],
    access: Access,
    placement: Placement | None = None,
) -> Starlette:
    """The service's app: operations endpoints, then the channels' ``routes`` in order (the
    web's ``/`` last).

    As one of several processes (``placement``), a turn's request for a conversation whose
    home is another process, or a request for a channel that runs in the first process only,
    is forwarded there (``affinity.Affinity``), before the login is checked: the answering
    process checks it.

    One ``Guard`` stands in front of all of it (the operations endpoints are its public paths,
    ``/readyz`` tells its details to logged-in callers only); every channel's route is behind
    the same login, ``Host`` and ``Origin`` checks. A mounted app's lifespan does not run by
    itself, so this app's lifespan runs that of every Starlette app among ``routes``.
    """
    apps = [app for route in routes if isinstance(app := _app_of(route), Starlette)]
    peers = Peers(placement) if placement is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if peers is not None:
                stack.push_async_callback(peers.aclose)
            for sub in apps:
                await stack.enter_async_context(sub.router.lifespan_context(sub))
            yield

    app = Starlette(
        routes=[*ops.ROUTES, *routes],
        lifespan=lifespan,
        middleware=[
            Middleware(RequestContext),
            *([Middleware(Affinity, peers=peers)] if peers is not None else []),
            Middleware(
                Guard,
                token=access.token,
                bind=access.bind,
                allow_hosts=access.allow_hosts,
                public=ops.PUBLIC,
            ),
            Middleware(Draining, state=state),
        ],
    )
    app.state.ops = state
    return app


def _app_of(route: BaseRoute) -> object:
    """The app a route hands its requests to (a mount's app, or a route's endpoint)."""
    return route.app if isinstance(route, Mount) else getattr(route, "endpoint", None)


def claims(routes: Sequence[BaseRoute], name: str) -> bool:
    """Whether one of ``routes`` (looking inside apps mounted at ``/``) serves ``/NAME`` or a
    path under it (a route whose first part is a parameter serves every name)."""
    for route in routes:
        path = str(getattr(route, "path", ""))
        if isinstance(route, Mount) and path == "" and isinstance(route.app, Starlette):
            if claims(route.app.routes, name):
                return True
            continue
        first = path.split("/", 2)[1] if path.startswith("/") else ""
        if first == name or first.startswith("{"):
            return True
    return False


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the service owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """Serves an ASGI app on a listening socket (``listen``) inside the running event loop."""

    name = "http"

    def __init__(
        self, app: ASGIApp, sock: socket.socket, lifespan: bool = True, keep_alive_s: int = 5
    ) -> None:
        self.app = app
        self.sock = sock
        self.lifespan = lifespan  # off for a second server of an app another one runs
        self.keep_alive_s = keep_alive_s
        name = sock.getsockname()
        self.host: str = name[0] if isinstance(name, tuple) else str(name)
        self.port: int = name[1] if isinstance(name, tuple) else 0
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start serving on the socket."""
        config: Any = uvicorn.Config(
            self.app,
            lifespan="on" if self.lifespan else "off",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=3,
            timeout_keep_alive=self.keep_alive_s,
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self.sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it stopped
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop listening, let open requests end (bounded), run the app's shutdown."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._server = self._task = None
