"""Server-sent event frames: an event as ``id:``/``data:`` lines, each frame made once."""

from __future__ import annotations

import json
from collections import OrderedDict

from cove.events import Event


def sse(event: Event, with_id: bool = True) -> bytes:
    """One event in the text/event-stream format (``id`` is its seq, for resuming)."""
    data = json.dumps(event.to_json(), separators=(",", ":"))
    head = f"id: {event.seq}\n" if with_id else ""
    return f"{head}data: {data}\n\n".encode()


class Frames:
    """SSE frames of recent events, made once: a hub hands the same event to every watcher."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._frames: OrderedDict[int, tuple[Event, bytes]] = OrderedDict()

    def frame(self, event: Event, with_id: bool) -> bytes:
        """The frame of ``event`` (the entry keeps the event alive, so its id stays unique)."""
        if not with_id:
            return sse(event, with_id)
        hit = self._frames.get(id(event))
        if hit is not None and hit[0] is event:
            return hit[1]
        data = sse(event)
        self._frames[id(event)] = (event, data)
        if len(self._frames) > self._size:
            self._frames.popitem(last=False)
        return data
