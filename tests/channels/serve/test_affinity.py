"""Conversation affinity: which requests go to a conversation's home process, and what a
forwarded request carries (a real uvicorn on a unix socket stands for the home process)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cove.channels.serve.affinity import (
    FORWARDED,
    MAX_FORWARD_BYTES,
    Affinity,
    Peers,
    Placement,
    home_of,
    mark_forwarded,
)
from cove.channels.serve.http import HttpServer

CID = "0123456789abcdef0123456789abcdef"


def scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path}


def test_a_home_is_stable_and_spreads_conversations() -> None:
    assert home_of(CID, 2) == home_of(CID, 2)
    assert [home_of(CID, n) for n in (1, 2, 3, 4)] == [0, 0, 1, 2]  # CRC-32, not a salted hash
    homes = {home_of(f"{i:032x}", 4) for i in range(64)}
    assert homes == {0, 1, 2, 3}


def test_only_what_runs_or_follows_a_turn_has_a_home() -> None:
    where = Placement(index=0, sockets=(Path("a"), Path("b")), once=("mcp", "inbox"))
    home = home_of(CID, 2)
    for method, path in (
        ("POST", f"/api/conversations/{CID}/messages"),
        ("POST", f"/api/conversations/{CID}/cancel"),
        ("DELETE", f"/api/conversations/{CID}"),
        ("GET", f"/api/conversations/{CID}/events"),
    ):
        assert where.home(scope(method, path)) == home, path
    for method, path in (
        ("GET", f"/api/conversations/{CID}"),
        ("GET", f"/api/conversations/{CID}/messages"),
        ("GET", f"/c/{CID}"),
        ("POST", "/api/conversations"),
        ("PUT", f"/api/conversations/{CID}/files/a.txt"),
        ("POST", "/api/conversations/../../etc/messages"),
        ("POST", "/api/conversations/a%2Fb/messages"),
        ("POST", f"/api/conversations/{'x' * 65}/messages"),
    ):
        assert where.home(scope(method, path)) is None, path
    # The channels that run once are answered by the first process, under their /NAME.
    assert where.home(scope("POST", "/mcp")) == 0
    assert where.home(scope("GET", "/inbox/pending")) == 0
    assert where.home(scope("GET", "/inboxes")) is None
    assert Placement(index=1, sockets=(Path("a"), Path("b"))).home(scope("POST", "/mcp")) is None


class Home:
    """What the home process received: a tiny app on a real unix socket."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.watchers = 0  # requests at the events route, each answered once ``watched`` ones are
        self.watched = 0
        self.all_watching = asyncio.Event()

    async def events(self, request: Request) -> Response:
        """Held until ``watched`` requests are held together (as event streams are)."""
        self.watchers += 1
        if self.watchers >= self.watched:
            self.all_watching.set()
        await self.all_watching.wait()
        return JSONResponse({"watchers": self.watchers})

    async def echo(self, request: Request) -> Response:
        body = await request.body()
        self.seen.append(
            {
                "headers": request.headers.raw,
                "body": body,
                "forwarded": request.scope.get(FORWARDED),
            }
        )
        return JSONResponse({"size": len(body)}, headers={"x-request-id": "the-home-s-own"})

    def app(self) -> Starlette:
        path = "/api/conversations/{cid}"
        return Starlette(
            routes=[
                Route(path + "/messages", self.echo, methods=["POST"]),
                Route(path + "/events", self.events, methods=["GET"]),
            ]
        )


@contextlib.asynccontextmanager
async def forwarding(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Home]]:
    """Process 0's middleware over a stand-in app, and process 1 served on its socket."""
    home = Home()
    paths = (tmp_path / "0.sock", tmp_path / "1.sock")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(paths[1]))
    unix.listen(2048)  # as serve's own sockets
    server = HttpServer(mark_forwarded(home.app()), unix, lifespan=False)
    await server.start()
    peers = Peers(Placement(index=0, sockets=paths))

    async def here(scope: Any, receive: Any, send: Any) -> None:
        await JSONResponse({"here": True})(scope, receive, send)

    app = Affinity(here, peers)
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client, home
    finally:
        await peers.aclose()
        await server.stop()
        unix.close()


def conversation_at(home: int) -> str:
    return next(f"{i:032x}" for i in range(100) if home_of(f"{i:032x}", 2) == home)


async def test_a_forwarded_request_is_rebuilt_not_passed_through(tmp_path: Path) -> None:
    async with forwarding(tmp_path) as (client, home):
        local = await client.post(f"/api/conversations/{conversation_at(0)}/messages", json={})
        assert local.json() == {"here": True} and home.seen == []

        url = f"/api/conversations/{conversation_at(1)}/messages"
        answer = await client.post(
            url,
            content=b'{"text": "hi"}',
            headers={
                "connection": "keep-alive, x-secret",
                "keep-alive": "timeout=600",
                "te": "trailers",
                "upgrade": "h2c",
                "x-request-id": "smuggled id",
                "cookie": "cove_session=abc",
                "x-secret": "for the next hop only",
            },
        )
        assert answer.status_code == 200 and answer.json() == {"size": 14}
        assert answer.headers["x-cove-via"] == "0"
        assert "x-request-id" not in answer.headers  # the forwarding side sets its own
    [seen] = home.seen
    headers = {k.decode().lower(): v.decode() for k, v in seen["headers"]}
    assert seen["forwarded"] is True and seen["body"] == b'{"text": "hi"}'
    assert headers["content-length"] == "14" and headers["cookie"] == "cove_session=abc"
    for dropped in ("keep-alive", "te", "upgrade", "transfer-encoding", "x-secret"):
        assert dropped not in headers
    assert headers.get("connection", "keep-alive") == "keep-alive"  # the forwarder's own
    assert "x-request-id" not in headers  # only the forwarding side's own id is passed on


async def test_more_streams_than_an_http_pool_holds_are_forwarded_at_once(tmp_path: Path) -> None:
    # Each forwarded event stream holds a connection to its home while it is watched: 150 of
    # them at once (httpx's default pool stops at 100, and would wait for one to end).
    async with forwarding(tmp_path) as (client, home):
        home.watched = 150
        url = f"/api/conversations/{conversation_at(1)}/events"
        async with asyncio.timeout(20):
            answers = await asyncio.gather(*(client.get(url) for _ in range(home.watched)))
        assert {a.status_code for a in answers} == {200}
        assert {a.json()["watchers"] for a in answers} == {150}


async def test_a_body_over_the_bound_is_refused_before_it_is_forwarded(tmp_path: Path) -> None:
    async with forwarding(tmp_path) as (client, home):
        url = f"/api/conversations/{conversation_at(1)}/messages"
        answer = await client.post(url, content=b"x" * (MAX_FORWARD_BYTES + 1))
        assert answer.status_code == 413
        odd = await client.post(url + "?a=b%20c&d", content=b"{}")
        assert odd.status_code == 200
    assert [len(seen["body"]) for seen in home.seen] == [2]  # the refused one never left


async def test_a_home_that_cannot_be_reached_is_a_503(tmp_path: Path) -> None:
    peers = Peers(Placement(index=0, sockets=(tmp_path / "0.sock", tmp_path / "gone.sock")))

    async def here(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not for this process")

    transport = httpx.ASGITransport(app=Affinity(here, peers))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        answer = await client.post(f"/api/conversations/{conversation_at(1)}/messages", json={})
    await peers.aclose()
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
