"""JSON API: sending, cancelling, the live event streams (SSE) and variables."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from cove.channels.web.errors import BadInput
from cove.channels.web.state import WebState, json_body, text_field, web
from cove.conversation import VarVersionRecord
from cove.conversation.watch.stream import WatchStream
from cove.errors import NotFound
from cove.events import Event

#: A comment line this often keeps proxies from closing an idle stream and finds dead clients.
HEARTBEAT_S = 15.0
MAX_MESSAGE_CHARS = 100_000
MAX_BATCH = 256


def message_text(body: dict[str, Any]) -> str:
    """The ``text`` of a message body (422 when missing, empty or too long)."""
    text = text_field(body, "text")
    assert text is not None
    if len(text) > MAX_MESSAGE_CHARS:
        raise BadInput(f"the message is over {MAX_MESSAGE_CHARS:,} characters")
    return text


async def start_turn(
    state: WebState, conversation_id: str, text: str, model: str | None = None
) -> bool:
    """Start a turn of ``text`` (with its own ``model``, when given); True when it queued
    behind a running one. The calls it asks about go to the conversation's pages as cards.

    Answered once the turn started or queued: a refusal (busy in another process) raises here,
    for the request to report, not as an error nobody sees.
    """
    handle = state.convs.send(conversation_id, text, model=model, approver=state.approvals.ask)
    return await state.start(handle, text)


async def send(request: Request) -> Response:
    body = await json_body(request)
    text = message_text(body)
    state = web(request)
    record = await state.convs.get(request.path_params["cid"])  # 404 now, not in the stream
    state.convs.check_model()  # no model endpoint: a clear 503 now, not a silent failed turn
    # A model for this turn alone (the conversation's stays as it is): checked before it runs.
    model = text_field(body, "model", required=False)
    if model is not None:
        model = await state.convs.checked_model(model)
    queued = await start_turn(state, record.id, text, model)
    body = {"conversation_id": record.id, "accepted": True, "queued": queued}
    return JSONResponse(body, status_code=202)


async def cancel(request: Request) -> Response:
    cancelled = await web(request).convs.cancel(request.path_params["cid"])
    return JSONResponse({"cancelled": cancelled})


def _after(request: Request) -> int | None:
    # The browser's EventSource sends Last-Event-ID when it reconnects; it wins over ?after.
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(f"after / Last-Event-ID must be a sequence number, got {raw!r}") from None
    if value < 0:
        raise BadInput("after / Last-Event-ID must not be negative")
    return value


class _Batches(Protocol):
    """An event stream read in batches: what ``WatchStream`` offers beside ``async for``."""

    def ready(self) -> asyncio.Future[None]: ...

    def take(self, limit: int) -> list[Event]: ...


class _OneAtATime:
    """``_Batches`` over any async iterator of events (a list watch): one read at a time, in
    a task of its own."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self._events = events
        self._next: asyncio.Future[Event] | None = None

    def ready(self) -> asyncio.Future[Any]:
        if self._next is None:
            self._next = asyncio.ensure_future(self._events.__anext__())
        return self._next

    def take(self, limit: int) -> list[Event]:
        if self._next is None or not self._next.done():
            return []
        read, self._next = self._next, None
        return [read.result()]  # raises the stream's end or error

    def cancel(self) -> None:
        if self._next is not None:
            self._next.cancel()


class _Relay:
    """Reads one watch stream, and the page's notices, into SSE frames.

    Each wake takes every event ready at once and writes them as one chunk: with many
    clients the per-write cost, not the JSON, is what limits delivery, and a conversation's
    stream is waited on through a future, not a task per event.
    """

    def __init__(
        self,
        state: WebState,
        events: _Batches,
        notices: asyncio.Queue[dict[str, Any]] | None,
    ) -> None:
        self.state = state
        self.events = events
        self.notices = notices
        self.next_notice: asyncio.Future[dict[str, Any]] | None = None
        self.ended = False

    def pending(self) -> set[asyncio.Future[Any]]:
        """The reads to wait on."""
        if self.notices is not None and self.next_notice is None:
            self.next_notice = asyncio.ensure_future(self.notices.get())
        ready = self.events.ready()
        return {ready} if self.next_notice is None else {ready, self.next_notice}

    def read(self, with_id: bool) -> bytes:
        """Everything ready now as one write."""
        out: list[bytes] = []
        if self.next_notice is not None and self.next_notice.done():
            notice = json.dumps(self.next_notice.result(), separators=(",", ":"))
            out.append(f"data: {notice}\n\n".encode())
            self.next_notice = None
        try:
            frame = self.state.frames.frame
            out.extend(frame(event, with_id) for event in self.events.take(MAX_BATCH))
        except StopAsyncIteration:
            self.ended = True
        return b"".join(out)

    async def cancel(self) -> None:
        """Stop the pending reads."""
        if isinstance(self.events, _OneAtATime):
            self.events.cancel()
        if self.next_notice is not None:
            self.next_notice.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.next_notice


async def _stream(
    state: WebState,
    events: Any,
    with_id: bool,
    notices_of: str | None = None,
) -> AsyncIterator[bytes]:
    """Relay ``events`` (and the notices of conversation ``notices_of``) as SSE, with
    heartbeats, until the client or the server goes."""
    yield b"retry: 1000\n\n"
    listening = state.notices.listen(notices_of) if notices_of else contextlib.nullcontext(None)
    async with events as stream:
        with listening as notices:
            batches = stream if isinstance(stream, WatchStream) else _OneAtATime(stream)
            relay = _Relay(state, batches, notices)
            closing = asyncio.ensure_future(state.closing.wait())
            try:
                while not relay.ended and not closing.done():
                    waits = relay.pending()
                    if not any(wait.done() for wait in waits):  # else what came is read now
                        done, _ = await asyncio.wait(
                            {*waits, closing},
                            timeout=HEARTBEAT_S,
                            return_when=asyncio.FIRST_COMPLETED,
                        )
                        if closing in done:
                            return
                        if not done:
                            yield b": keep-alive\n\n"
                            continue
                    chunk = relay.read(with_id)
                    if chunk:
                        yield chunk
            finally:
                closing.cancel()
                await relay.cancel()


_SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


async def events(request: Request) -> Response:
    state = web(request)
    record = await state.convs.get(request.path_params["cid"])
    stream = state.convs.watch(record.id, after=_after(request))
    return StreamingResponse(
        _stream(state, stream, True, record.id),
        media_type="text/event-stream",
        headers=_SSE_HEADERS,
    )


async def list_events(request: Request) -> Response:
    state = web(request)
    stream = state.convs.watch_list()
    return StreamingResponse(
        _stream(state, stream, False), media_type="text/event-stream", headers=_SSE_HEADERS
    )


def var_json(v: VarVersionRecord) -> dict[str, Any]:
    """A variable version as the API shows it (the preview, never the encoded value)."""
    return {
        "name": v.name,
        "version": v.version,
        "kind": v.kind,
        "type": v.type_name,
        "size": v.size,
        "preview": v.preview,
        "turn": v.turn_position,
        "iteration": v.iteration_position,
        "block": v.block_position,
        "created_at": v.created_at,
    }


async def variables(request: Request) -> Response:
    current = await web(request).convs.variables(request.path_params["cid"])
    listed = [var_json(v) for _, v in sorted(current.items()) if v.kind != "deleted"]
    return JSONResponse({"variables": listed})


async def var_history(request: Request) -> Response:
    convs = web(request).convs
    history = await convs.var_history(request.path_params["cid"], request.path_params["name"])
    if not history:
        raise NotFound("variable", request.path_params["name"])
    return JSONResponse({"versions": [var_json(v) for v in history]})


ROUTES = [
    Route("/api/conversations/{cid}/messages", send, methods=["POST"]),
    Route("/api/conversations/{cid}/cancel", cancel, methods=["POST"]),
    Route("/api/conversations/{cid}/events", events, methods=["GET"]),
    Route("/api/conversations/{cid}/vars", variables, methods=["GET"]),
    Route("/api/conversations/{cid}/vars/{name}", var_history, methods=["GET"]),
    Route("/api/events", list_events, methods=["GET"]),
]
