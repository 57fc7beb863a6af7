"""Conversation affinity between the processes of one ``cove serve --processes N``.

Every process serves the whole HTTP surface on the shared port: reads and pages work anywhere
(the database is shared). A request that makes a turn run — or acts on the running one — belongs
to the conversation's *home* process (a stable hash of its id over N), where its environment is
live and its sandbox warm; so does the conversation's event stream, which the home process
feeds straight from the turn instead of rebuilding it from the store after every commit, as a
watcher in another process must. A process that receives such a request for another home
forwards it over that process's private unix socket and relays the answer as it comes (an
event stream included); the home process checks the login itself.

The forwarded request is rebuilt from what the HTTP server already parsed: the method, a path
that matched one of the routes below (a conversation id of plain characters), the query, the
headers minus the hop-by-hop ones, and a body read in full up to ``MAX_FORWARD_BYTES``; its
length is set anew, so nothing the client framed can be smuggled past the home's parser.
"""

from __future__ import annotations

import asyncio
import logging
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cove.channels.serve.logs import REQUEST_ID

log = logging.getLogger("cove.serve.affinity")

#: The response header naming the process that received and forwarded the request.
VIA = b"x-cove-via"
#: Marks a request that arrived over a process's private socket: it is never forwarded again.
FORWARDED = "cove.forwarded"
#: The largest body forwarded (a message is at most 100,000 characters; MCP calls are small).
MAX_FORWARD_BYTES = 2_000_000
#: How long an idle connection to another process is kept (that process keeps it longer).
FORWARD_KEEP_ALIVE_S = 30
#: Requests that run a turn, act on the running one or follow it: (method, path pattern).
_TURN_ROUTES = (
    ("GET", re.compile(r"^/api/conversations/([A-Za-z0-9_-]{1,64})/events$")),
    ("POST", re.compile(r"^/api/conversations/([A-Za-z0-9_-]{1,64})/messages$")),
    ("POST", re.compile(r"^/api/conversations/([A-Za-z0-9_-]{1,64})/cancel$")),
    (
        "POST",
        re.compile(r"^/api/conversations/([A-Za-z0-9_-]{1,64})/approvals/[A-Za-z0-9_-]{1,64}$"),
    ),
    ("DELETE", re.compile(r"^/api/conversations/([A-Za-z0-9_-]{1,64})$")),
)
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
#: Set anew on the forwarded request (its body is read in full first).
_REQUEST_ONLY = frozenset({b"content-length", b"expect", b"x-request-id"})
_QUERY = re.compile(rb"^[\x21-\x7e]{0,4096}$")


def home_of(conversation_id: str, processes: int) -> int:
    """The index of the process that runs ``conversation_id``'s turns (stable across restarts
    and machines: CRC-32 of the id, not Python's salted ``hash``)."""
    return zlib.crc32(conversation_id.encode()) % processes


@dataclass(frozen=True)
class Placement:
    """Where this process stands among the service's processes.

    ``sockets`` are the private unix sockets of every process, by index (this one's included);
    ``once`` names the channels that run in process ``FIRST`` only (MCP, Telegram, packages'
    channels): a request under ``/NAME`` of one of them is answered there.
    """

    index: int
    sockets: Sequence[Path]
    once: tuple[str, ...] = ()

    @property
    def processes(self) -> int:
        """How many processes serve."""
        return len(self.sockets)

    def at_home(self, conversation_id: str) -> bool:
        """Whether this process runs ``conversation_id``'s turns."""
        return home_of(conversation_id, self.processes) == self.index

    def home(self, scope: Scope) -> int | None:
        """The process that must answer this request, or None when any may."""
        path: str = scope["path"]
        top = path.split("/", 2)[1] if path.startswith("/") else ""
        if top in self.once:
            return FIRST
        for method, pattern in _TURN_ROUTES:
            match = pattern.match(path) if scope["method"] == method else None
            if match is not None:
                return home_of(match.group(1), self.processes)
        return None


#: The process that runs the channels that must run once (MCP's sessions live in its memory).
FIRST = 0


class Peers:
    """The connections to the other processes' private sockets, opened on first use."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self._clients: dict[int, httpx.AsyncClient] = {}

    def client(self, index: int) -> httpx.AsyncClient:
        """The client that reaches process ``index``."""
        client = self._clients.get(index)
        if client is None:
            # No bound on connections: each forwarded event stream holds one for as long as
            # its client watches. The limits are the transport's (a client given a transport
            # would ignore its own, leaving httpx's default of 100).
            limits = httpx.Limits(
                max_connections=None,
                max_keepalive_connections=64,
                keepalive_expiry=FORWARD_KEEP_ALIVE_S,
            )
            transport = httpx.AsyncHTTPTransport(
                uds=str(self.placement.sockets[index]), limits=limits
            )
            timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0)
            client = httpx.AsyncClient(transport=transport, timeout=timeout)
            self._clients[index] = client
        return client

    async def aclose(self) -> None:
        """Close every connection."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


class Affinity:
    """ASGI middleware: forwards a turn's request to its conversation's home process."""

    def __init__(self, app: ASGIApp, peers: Peers) -> None:
        self.app = app
        self.peers = peers
        self.placement = peers.placement

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get(FORWARDED):
            await self.app(scope, receive, send)
            return
        home = self.placement.home(scope)
        if home is None or home == self.placement.index:
            await self.app(scope, receive, send)
            return
        await self._forward(home, scope, receive, send)

    def _client(self, home: int) -> httpx.AsyncClient:
        return self.peers.client(home)

    async def _send(self, home: int, request: httpx.Request) -> httpx.Response:
        """Send, once more for a request that changes nothing when the connection was lost
        before an answer (a kept-alive connection the other side had just closed)."""
        try:
            return await self._client(home).send(request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            if request.method not in ("GET", "HEAD"):
                raise
            return await self._client(home).send(request, stream=True)

    async def _forward(self, home: int, scope: Scope, receive: Receive, send: Send) -> None:
        query: bytes = scope.get("query_string", b"")
        if not _QUERY.match(query):
            await _refuse(send, 400, "the query string is not plain ASCII")
            return
        body = await _read_body(receive)
        if body is None:  # the client left before sending it all
            return
        if len(body) > MAX_FORWARD_BYTES:
            await _refuse(send, 413, f"the request body is over {MAX_FORWARD_BYTES:,} bytes")
            return
        url = "http://cove" + scope["path"] + (f"?{query.decode()}" if query else "")
        headers = _end_to_end(scope["headers"])
        request_id = REQUEST_ID.get()  # the same id in both processes' log lines
        if request_id:
            headers.append((b"x-request-id", request_id.encode()))
        request = self._client(home).build_request(
            scope["method"], url, headers=headers, content=body
        )
        log.debug("forwarded", extra={"fields": {"to": home, "path": scope["path"]}})
        try:
            response = await self._send(home, request)
        except httpx.TransportError as exc:
            fields = {"to": home, "error": f"{type(exc).__name__}: {exc}"}
            log.warning("forward failed", extra={"fields": fields})
            await _refuse(send, 503, "the process that runs this conversation is restarting")
            return
        headers = [
            (k, v)
            for k, v in response.headers.raw
            if k.lower() not in _HOP_BY_HOP and k.lower() not in (b"x-request-id", VIA)
        ]
        headers.append((VIA, str(self.placement.index).encode()))
        try:
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": headers}
            )
            # An event stream never ends by itself: stop relaying when the client leaves.
            relay = asyncio.ensure_future(_relay(home, response, send))
            left = asyncio.ensure_future(_disconnected(receive))
            try:
                await asyncio.wait((relay, left), return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (relay, left):
                    task.cancel()
                await asyncio.gather(relay, left, return_exceptions=True)
            if relay.done() and not relay.cancelled():
                relay.result()  # raises what failed in the relay
        finally:
            await response.aclose()


def _end_to_end(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request's headers less the hop-by-hop ones (those ``Connection`` names included)
    and those set anew."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    dropped = _HOP_BY_HOP | _REQUEST_ONLY | named
    return [(k, v) for k, v in headers if k.lower() not in dropped]


async def _relay(home: int, response: httpx.Response, send: Send) -> None:
    """Pass the home's answer on as it comes; a cut (the home died) ends it cleanly, so an
    event stream's client reconnects."""
    try:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except httpx.TransportError as exc:
        log.warning("forward cut", extra={"fields": {"to": home, "error": str(exc)}})
    await send({"type": "http.response.body", "body": b""})


async def _disconnected(receive: Receive) -> None:
    """Return once the client disconnects (the request body was read before)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (cut just past ``MAX_FORWARD_BYTES``: too large to forward), or
    None when the client disconnected first."""
    parts: list[bytes] = []
    size = 0
    while size <= MAX_FORWARD_BYTES:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


async def _refuse(send: Send, status: int, error: str) -> None:
    body = ('{"error": "' + error + '"}').encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 503:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def mark_forwarded(app: ASGIApp) -> ASGIApp:
    """The app as served on a process's private socket: its requests are never forwarded."""

    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        scope[FORWARDED] = True
        await app(scope, receive, send)

    return marked
