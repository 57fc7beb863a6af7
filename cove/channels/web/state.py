"""What the app holds while it runs, and small helpers shared by the route modules."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from cove.channels.web.approvals import WebApprovals
from cove.channels.web.errors import BadInput, message_of
from cove.channels.web.notices import Notices
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


@dataclass
class WebState:
    """The app's ``Conversations``, the turns it sent that still run, its notices and the
    approval requests of those turns."""

    settings: Settings
    convs: Conversations
    upload_limit: int
    frames: Frames = field(default_factory=Frames)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    drains: set[asyncio.Task[None]] = field(default_factory=set)
    notices: Notices = field(default_factory=Notices)
    approvals: WebApprovals = field(init=False)

    def __post_init__(self) -> None:
        self.approvals = WebApprovals(self.notices, self.settings.extensions.approval_timeout_s)

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
