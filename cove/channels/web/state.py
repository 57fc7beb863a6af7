"""What the app holds while it runs, and small helpers shared by the route modules."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from cove.channels.web.errors import BadInput, message_of
from cove.channels.web.sse import Frames
from cove.config import Settings
from cove.conversation import Conversations, TurnHandle
from cove.errors import CoveError
from cove.events import TurnQueued, TurnStarted

log = logging.getLogger("cove.web")


def refused(request: str, exc: CoveError) -> dict[str, Any]:
    """The notice for a queued message refused when its time came."""
    return {
        "type": "send_refused",
        "request": request,
        "error": type(exc).__name__,
        "message": message_of(exc),
    }


class Notices:
    """Messages from the web channel itself to the pages open on a conversation."""

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}

    @contextlib.contextmanager
    def listen(self, conversation_id: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of the conversation's notices while the body runs."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=64)
        listeners = self._queues.setdefault(conversation_id, set())
        listeners.add(queue)
        try:
            yield queue
        finally:
            listeners.discard(queue)
            if not listeners:
                self._queues.pop(conversation_id, None)

    def publish(self, conversation_id: str, notice: dict[str, Any]) -> None:
        """Hand ``notice`` to every page listening on the conversation (never blocks)."""
        for queue in self._queues.get(conversation_id, ()):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(notice)


@dataclass
class WebState:
    """The app's ``Conversations``, the turns it sent that still run, and its notices."""

    settings: Settings
    convs: Conversations
    upload_limit: int
    frames: Frames = field(default_factory=Frames)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    drains: set[asyncio.Task[None]] = field(default_factory=set)
    notices: Notices = field(default_factory=Notices)

    async def start(self, handle: TurnHandle, request: str) -> bool:
        """Wait until a sent turn starts or queues; True when it queued behind another.

        Raises:
            CoveError: The turn was refused before it started (e.g. ``Busy``: another process
                runs a turn of the conversation).
        """
        try:
            first = await anext(handle)
        except StopAsyncIteration:
            raise CoveError("the turn ended before it started") from None
        self._drain(handle, request, queued=isinstance(first, TurnQueued))
        return isinstance(first, TurnQueued)

    def _drain(self, handle: TurnHandle, request: str, queued: bool) -> None:
        """Read the rest of a sent turn's own stream in the background (pages follow ``watch``).

        A queued turn can still be refused when its time comes: the conversation's pages get
        a notice, since the request that sent it was answered long before.
        """

        async def read() -> None:
            started = not queued
            try:
                async for event in handle:
                    started = started or isinstance(event, TurnStarted)
            except CoveError as exc:
                fields = {"conversation_id": handle.conversation_id, "error": type(exc).__name__}
                log.info("turn refused", extra={"fields": fields})
                if not started:
                    self.notices.publish(handle.conversation_id, refused(request, exc))

        task = asyncio.get_running_loop().create_task(read())
        self.drains.add(task)
        task.add_done_callback(self.drains.discard)


def web(request: Request) -> WebState:
    """The app's state."""
    state: WebState = request.app.state.web
    return state


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object body (422 when it is not one)."""
    raw = await request.body()
    if len(raw) > 1_000_000:
        raise BadInput("the request body is over 1 MB")
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise BadInput("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise BadInput("the request body must be a JSON object")
    return body


def text_field(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    """A string field of a JSON body; 422 when missing (if required) or not a string."""
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadInput(f"field {name!r} must be a non-empty string")
    return value


def int_field(body: dict[str, Any], name: str) -> int:
    """An integer field of a JSON body; 422 when missing or not an integer."""
    value = body.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadInput(f"field {name!r} must be an integer")
    return value
