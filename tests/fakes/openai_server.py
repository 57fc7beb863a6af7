"""A fake OpenAI-compatible endpoint that the real ``openai`` client talks to over HTTP.

It serves ``POST /v1/chat/completions`` (streamed SSE and plain JSON) and ``GET /v1/models`` with
scripted replies, records every request body, and injects faults on demand::

    with FakeOpenAI(replies=['{"thinking": "", "answer": "hi"}']) as server:
        settings = settings.replace(base_url=server.base_url)
        server.add_faults(Fault.rate_limit(retry_after=0.01), Fault.server_error())
        server.unsupported.add("json_schema")   # this endpoint rejects json_schema for good
        ...
        server.requests[-1]["response_format"]

Replies are strings, mappings (JSON-encoded) or callables receiving the request body. Requests
carrying no ``response_format`` are answered from ``subquery_replies`` when that queue is given.
Faults are consumed one per request, before any reply. The server runs uvicorn in a background
thread, so it serves sync and async tests alike and any event loop.

Standalone (for subprocess tests)::

    python -m tests.fakes.openai_server --port 0 --script replies.json [--chunk-size 16]

prints ``listening on http://127.0.0.1:PORT/v1`` once it accepts connections. The script is a JSON
list of replies or ``{"replies": [...], "subquery_replies": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import socket
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

FakeReply: TypeAlias = (
    str | Mapping[str, Any] | Callable[[dict[str, Any]], "str | Mapping[str, Any]"]
)
MALFORMED_REPLY = '{"thinking": "cut short", "code": ["x = 1"'


@dataclass(frozen=True)
class Fault:
    """One injected failure, consumed by the next request.

    Build with the class methods; ``kind`` is one of ``status`` (an error response), ``reply``
    (replace the reply text), ``stall`` / ``stall_mid`` (sleep before answering / mid-stream),
    ``gate`` (answer once a ``threading.Event`` is set), ``drop`` (close the connection
    mid-stream), ``garbage`` (a 200 whose body is not JSON), ``shapeless`` (a 200 whose JSON
    is no chat completion) and ``stream_error`` (an error object sent as an SSE event
    mid-stream).
    """

    kind: str
    status: int = 500
    message: str = ""
    param: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    text: str = ""
    seconds: float = 0.0
    after_chunks: int = 1
    opened: threading.Event | None = field(default=None, compare=False)

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.01) -> Fault:
        """A 429 with a ``Retry-After`` header (seconds, fractional allowed) unless None."""
        headers = () if retry_after is None else (("retry-after", _seconds(retry_after)),)
        return cls("status", 429, "Rate limit reached, slow down", headers=headers)

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        """A 5xx error."""
        return cls("status", status, "The server had an error while processing your request")

    @classmethod
    def error(cls, status: int, message: str, param: str | None = None) -> Fault:
        """Any error status with an OpenAI-style body."""
        return cls("status", status, message, param=param)

    @classmethod
    def reject(cls, feature: str) -> Fault:
        """A one-off 400 rejecting ``feature`` (see ``FakeOpenAI.unsupported``)."""
        return cls("status", 400, _REJECTIONS[feature][0], param=_REJECTIONS[feature][1])

    @classmethod
    def malformed(cls) -> Fault:
        """A reply whose text is truncated, invalid JSON."""
        return cls("reply", text=MALFORMED_REPLY)

    @classmethod
    def empty(cls) -> Fault:
        """A reply with empty text."""
        return cls("reply", text="")

    @classmethod
    def stall(cls, seconds: float = 30.0, after_chunks: int | None = None) -> Fault:
        """Sleep, typically longer than the client's timeout.

        Before answering at all, or with ``after_chunks`` in the middle of a streamed reply.
        """
        if after_chunks is None:
            return cls("stall", seconds=seconds)
        return cls("stall_mid", seconds=seconds, after_chunks=after_chunks)

    @classmethod
    def gate(cls, opened: threading.Event) -> Fault:
        """Hold the answer until ``opened`` is set (or the server stops): a model call that
        lasts exactly as long as a test wants."""
        return cls("gate", opened=opened)

    @classmethod
    def drop(cls, after_chunks: int = 1) -> Fault:
        """Close the connection after ``after_chunks`` streamed chunks of the next reply."""
        return cls("drop", after_chunks=after_chunks)

    @classmethod
    def garbage(cls) -> Fault:
        """A 200 response whose body (or SSE data) is not JSON."""
        return cls("garbage")

    @classmethod
    def shapeless(cls) -> Fault:
        """A 200 response whose body (or SSE data) is JSON of no chat completion's shape."""
        return cls("shapeless")

    @classmethod
    def stream_error(cls, message: str, after_chunks: int = 1) -> Fault:
        """An ``{"error": ...}`` SSE event after ``after_chunks`` chunks, ending the stream."""
        return cls("stream_error", message=message, after_chunks=after_chunks)


_REJECTIONS: dict[str, tuple[str, str]] = {
    "json_schema": (
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
        "this model.",
        "response_format",
    ),
    "json_object": (
        "Invalid parameter: 'response_format' of type 'json_object' is not supported with "
        "this model.",
        "response_format",
    ),
    "reasoning_effort": (
        "Unrecognized request argument supplied: reasoning_effort",
        "reasoning_effort",
    ),
    "stream_options": ("Unrecognized request argument supplied: stream_options", "stream_options"),
    "stream": ("Streaming is not supported by this endpoint", "stream"),
}


class FakeOpenAI:
    """A scripted OpenAI-compatible HTTP server on 127.0.0.1 (see the module docstring).

    Attributes:
        requests: Every request body received (including rejected ones), oldest first.
        headers: The headers of every request, lower-cased names, parallel to ``requests``.
        unsupported: Features this endpoint rejects with a 400 on every request:
            ``json_schema``, ``json_object``, ``reasoning_effort``, ``stream_options``, ``stream``.
        send_usage: Whether responses include ``usage``.
        errors: Tracebacks of exceptions raised by reply callables (answered with a 500).
        listed: The model names ``GET /v1/models`` lists (``model`` alone by default).
        models_status: When set, ``GET /v1/models`` answers this HTTP status instead.
    """

    def __init__(
        self,
        replies: Iterable[FakeReply] = (),
        *,
        subquery_replies: Iterable[FakeReply] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "fake-model",
        chunk_size: int = 16,
        send_usage: bool = True,
        latency_s: float = 0.0,
    ) -> None:
        """Build a stopped server; ``port=0`` picks a free port at ``start``.

        ``latency_s``: every answer waits this long first (a model's own time, for benchmarks).
        """
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.unsupported: set[str] = set()
        self.send_usage = send_usage
        self.errors: list[str] = []
        self.model = model
        self.listed: list[str] = [model]
        self.models_status: int | None = None
        self.chunk_size = chunk_size
        self.latency_s = latency_s
        self._replies: collections.deque[FakeReply] = collections.deque(replies)
        self._subquery_replies = (
            None if subquery_replies is None else collections.deque(subquery_replies)
        )
        self._default: FakeReply | None = None
        self._faults: collections.deque[Fault] = collections.deque()
        self._host = host
        self._port = port
        self._stopping = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    # -- scripting ---------------------------------------------------------------------------

    def add_replies(self, *replies: FakeReply) -> None:
        """Queue iteration replies (and sub-query replies when no sub-query queue was given)."""
        self._replies.extend(replies)

    def add_subquery_replies(self, *replies: FakeReply) -> None:
        """Queue replies for requests without ``response_format``."""
        if self._subquery_replies is None:
            self._subquery_replies = collections.deque()
        self._subquery_replies.extend(replies)

    def respond_with(self, reply: FakeReply) -> None:
        """Answer every request with ``reply`` once the queues are empty."""
        self._default = reply

    def add_faults(self, *faults: Fault) -> None:
        """Queue faults; each is consumed by one request, before any reply."""
        self._faults.extend(faults)

    @property
    def base_url(self) -> str:
        """The base URL to hand to an OpenAI client, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self._port}/v1"

    @property
    def port(self) -> int:
        """The port the server listens on (known after ``start``)."""
        return self._port

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Start serving in a background thread; returns once connections are accepted."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            loop="asyncio",
            http="h11",
            log_config=None,
            # The dropped-connection fault makes uvicorn log an error by design; keep it quiet.
            log_level="critical",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread; pending stalls end at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeOpenAI:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        # Joining the thread blocks briefly; do it off the caller's event loop.
        await asyncio.to_thread(self.stop)

    # -- HTTP --------------------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        if self.models_status is not None:
            return _error(self.models_status, "fake server: listing models failed")
        data = [{"id": name, "object": "model"} for name in self.listed]
        return JSONResponse({"object": "list", "data": data})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        rejected = self._rejection(body)
        if rejected is not None:
            return _error(400, *_REJECTIONS[rejected])
        fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind == "status":
            return _error(fault.status, fault.message, fault.param, dict(fault.headers))
        if fault is not None and fault.kind == "stall":
            await self._sleep(fault.seconds)
        if fault is not None and fault.opened is not None:
            while not fault.opened.is_set() and not self._stopping.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        stream = bool(body.get("stream"))
        if fault is not None and fault.kind == "garbage":
            if stream:
                return StreamingResponse(_garbage_events(), media_type="text/event-stream")
            return Response("this is not json", media_type="application/json")
        if fault is not None and fault.kind == "shapeless":
            if stream:
                return StreamingResponse(_shapeless_events(), media_type="text/event-stream")
            return JSONResponse({"choices": "none today"})
        text: str | None = None
        if fault is not None and fault.kind == "reply":
            text = fault.text
        else:
            try:
                text = self._reply_text(body)
            except Exception:
                self.errors.append(traceback.format_exc())
                return _error(500, "fake server: a reply callable raised; see server.errors")
        if text is None:
            return _error(400, "fake server: the script has no more replies")
        usage = self._usage(body, text)
        if not stream:
            return JSONResponse(self._completion(text, usage))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = self._events(text, usage if include_usage else None, fault)
        return StreamingResponse(events, media_type="text/event-stream")

    def _rejection(self, body: Mapping[str, Any]) -> str | None:
        response_format = body.get("response_format") or {}
        checks = {
            "json_schema": response_format.get("type") == "json_schema",
            "json_object": response_format.get("type") == "json_object",
            "reasoning_effort": "reasoning_effort" in body,
            "stream_options": "stream_options" in body,
            "stream": bool(body.get("stream")),
        }
        return next(
            (name for name, hit in checks.items() if hit and name in self.unsupported), None
        )

    def _reply_text(self, body: dict[str, Any]) -> str | None:
        queue = self._replies
        if self._subquery_replies is not None and not body.get("response_format"):
            queue = self._subquery_replies
        if queue:
            reply = queue.popleft()
        elif self._default is not None:
            reply = self._default
        else:
            return None
        if callable(reply):
            reply = reply(body)
        return reply if isinstance(reply, str) else json.dumps(reply)

    def _usage(self, body: Mapping[str, Any], text: str) -> dict[str, int] | None:
        if not self.send_usage:
            return None
        prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        tokens_in, tokens_out = (prompt + 3) // 4, (len(text) + 3) // 4
        return {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        }

    def _completion(self, text: str, usage: dict[str, int] | None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }

    async def _events(
        self, text: str, usage: dict[str, int] | None, fault: Fault | None
    ) -> AsyncIterator[str]:
        pieces = [text[i : i + self.chunk_size] for i in range(0, len(text), self.chunk_size)]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": piece} for piece in pieces]
        drop_after = fault.after_chunks if fault is not None and fault.kind == "drop" else None
        stall_after = (
            fault.after_chunks if fault is not None and fault.kind == "stall_mid" else None
        )
        for index, delta in enumerate(deltas):
            if drop_after is not None and index > drop_after:
                raise _DroppedConnection
            if fault is not None and fault.kind == "stream_error" and index == fault.after_chunks:
                yield _sse({"error": {"message": fault.message, "type": "server_error"}})
                return
            if fault is not None and index == stall_after:
                await self._sleep(fault.seconds)
            yield _sse(self._chunk([{"index": 0, "delta": delta, "finish_reason": None}]))
            await asyncio.sleep(0)
        if drop_after is not None:
            raise _DroppedConnection
        yield _sse(self._chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        if usage is not None:
            yield _sse(self._chunk([], usage=usage))
        yield "data: [DONE]\n\n"

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
            **extra,
        }

    async def _sleep(self, seconds: float) -> None:
        # Sleep in slices so that ``stop`` (another thread: no asyncio.Event) ends a stall promptly.
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stopping.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


class _DroppedConnection(Exception):
    """Raised inside a streaming response so that uvicorn aborts the connection."""


async def _garbage_events() -> AsyncIterator[str]:
    yield "data: {not json at all\n\n"


async def _shapeless_events() -> AsyncIterator[str]:
    yield _sse({"id": "chatcmpl-fake", "choices": [{"index": 0, "delta": "plain text"}]})
    yield "data: [DONE]\n\n"


def _sse(payload: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _error(
    status: int, message: str, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_exceeded"
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def _load_script(path: str) -> tuple[list[Any], list[Any] | None]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, list):
        return data, None
    return list(data["replies"]), data.get("subquery_replies")


def main(argv: list[str] | None = None) -> None:
    """Serve scripted replies until interrupted (for subprocess tests)."""
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible endpoint.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="JSON file of replies")
    parser.add_argument("--unsupported", action="append", default=[], choices=sorted(_REJECTIONS))
    parser.add_argument("--no-usage", action="store_true", help="omit usage from responses")
    parser.add_argument("--chunk-size", type=int, default=16, help="characters per streamed chunk")
    args = parser.parse_args(argv)
    replies, subquery_replies = _load_script(args.script) if args.script else ([], None)
    server = FakeOpenAI(
        replies,
        subquery_replies=subquery_replies,
        host=args.host,
        port=args.port,
        send_usage=not args.no_usage,
        chunk_size=args.chunk_size,
    )
    server.unsupported.update(args.unsupported)
    server.start()
    print(f"listening on {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
