"""Reading a streamed chat completion: the body's bytes split into server-sent events here, each
event's JSON decoded once.

The ``openai`` package sends the request (its headers, retries and status errors) and hands
back the open response; its own SSE reader would then take each chunk through an incremental
line decoder, an event object and a typed check per layer, which cost more than the chunk's
JSON. ``read_reply`` reads the response's bytes instead: complete events are cut at their blank
line, the ``data`` of each is decoded with ``json.loads``, and the package's rules are kept:
``[DONE]`` ends the reply (the rest of the body is drained briefly, so the connection can be
used again), an ``{"error": ...}`` event raises ``openai.APIError`` with its message, and the
HTTP library's failures while reading become ``APITimeoutError`` / ``APIConnectionError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol

import openai

from cove.engine.llm.chunks import chunk_text, usage_of
from cove.engine.llm.client import DeltaSink
from cove.results import Usage

#: How long the rest of a body is read after ``[DONE]`` (as the package does) before the
#: response is closed anyway.
DRAIN_S: Final = 0.1


class EventSplitter:
    """Cuts a ``text/event-stream`` body, fed in pieces, into the ``data`` of its events.

    Lines may end in LF, CRLF or CR; an event ends at a blank line; its ``data:`` lines are
    joined with newlines (one space after the colon dropped). Other fields (``event``, ``id``,
    ``retry``) and comments are ignored, and an event without data is no event (the SSE rules).
    """

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, piece: bytes) -> list[bytes]:
        """The data of every event that ``piece`` completes, in order."""
        buffer = self._tail + piece if self._tail else piece
        if b"\r" in buffer:
            held = buffer.endswith(b"\r")  # maybe half of a CRLF: decided by the next piece
            body = buffer[:-1] if held else buffer
            buffer = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if held else b"")
        *events, self._tail = buffer.split(b"\n\n")
        return [data for event in events if (data := _data(event)) is not None]


def _data(event: bytes) -> bytes | None:
    """The joined ``data`` of one event's lines, or None when it has none."""
    if event.startswith(b"data: ") and b"\n" not in event:  # the usual event: one data line
        return event[6:]
    found: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            found.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(found) if found else None


class _Response(Protocol):
    """The part of the package's HTTP response that is read here."""

    @property
    def request(self) -> Any: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


async def read_reply(response: _Response, on_delta: DeltaSink | None) -> tuple[str, Usage | None]:
    """The text of choice 0 of a streamed reply, passed on as it arrives, and the usage.

    Raises:
        openai.APIError: An ``{"error": ...}`` event (its message), or the connection failed
            or timed out mid-reply (``APIConnectionError``, ``APITimeoutError``).
        json.JSONDecodeError: An event's data is not JSON.
        MalformedReply: A chunk of a shape no chat completion has.
    """
    parts: list[str] = []
    usage = None
    splitter = EventSplitter()
    pieces = response.aiter_bytes()
    timeout, failure = _library_errors(response)
    try:
        async for piece in pieces:
            for data in splitter.feed(piece):
                if data.startswith(b"[DONE]"):
                    await _drain(pieces)
                    return "".join(parts), usage
                chunk = json.loads(data)
                _raise_error_event(chunk, response)
                usage = usage_of(chunk) or usage
                text = chunk_text(chunk)
                if text:
                    parts.append(text)
                    if on_delta is not None:
                        await on_delta(text)
    except timeout as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except failure as exc:
        raise openai.APIConnectionError(request=response.request) from exc
    finally:
        await response.aclose()
    return "".join(parts), usage


def _library_errors(response: _Response) -> tuple[type[Exception], type[Exception]]:
    """The timeout and request-error classes of the HTTP library the response comes from
    (``httpx`` or the ``httpx2`` of newer ``openai`` releases: both name them alike)."""
    library = sys.modules[type(response).__module__.partition(".")[0]]
    timeout = getattr(library, "TimeoutException", None)
    failure = getattr(library, "RequestError", None)
    if not (isinstance(timeout, type) and isinstance(failure, type)):
        return _Never, _Never
    return timeout, failure


class _Never(Exception):
    """Stands for an error class the HTTP library does not have: nothing raises it."""


def _raise_error_event(chunk: Any, response: _Response) -> None:
    """Raise ``APIError`` for an ``{"error": ...}`` event, as the package's reader does."""
    if not isinstance(chunk, dict) or not chunk.get("error"):
        return
    error = chunk["error"]
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    raise openai.APIError(message, request=response.request, body=error)


async def _drain(pieces: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (usually nothing) for at most ``DRAIN_S``, so that an
    HTTP/1.1 connection is left clean for the next request."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DRAIN_S):
            async for _ in pieces:
                pass
