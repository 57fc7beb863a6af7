"""What the app holds while it runs, and small helpers shared by the route modules."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from cove.channels.web.errors import BadInput
from cove.channels.web.sse import Frames
from cove.config import Settings
from cove.conversation import Conversations, TurnHandle
from cove.errors import CoveError

log = logging.getLogger("cove.web")


@dataclass
class WebState:
    """The one ``Conversations`` of the app, and the turns it sent that still run."""

    settings: Settings
    convs: Conversations
    upload_limit: int
    frames: Frames = field(default_factory=Frames)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    drains: set[asyncio.Task[None]] = field(default_factory=set)

    def drain(self, handle: TurnHandle) -> None:
        """Read a sent turn's own stream in the background (browsers follow ``watch``)."""

        async def read() -> None:
            # A turn that fails before it starts (busy elsewhere) ends its stream with the
            # error; watchers of the conversation see what did happen.
            try:
                async for _ in handle:
                    pass
            except CoveError as exc:
                fields = {"conversation_id": handle.conversation_id, "error": type(exc).__name__}
                log.info("turn refused", extra={"fields": fields})

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
