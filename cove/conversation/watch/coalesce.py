"""Batching model deltas for channels with rate limits (Telegram edits, SSE frames).

``coalesce_deltas(events, window_s)`` passes every event through in order, except that
consecutive ``ModelDelta`` events of one iteration are merged into one (their texts joined,
the last one's ``seq``) and released at most once per window, or as soon as another event
arrives. Nothing is lost and the order is kept; only the number of delta events shrinks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterable, AsyncIterator

from cove.events import Event, ModelDelta

_END = object()


async def coalesce_deltas(
    events: AsyncIterable[Event], window_s: float = 0.5
) -> AsyncIterator[Event]:
    """``events`` with runs of ``ModelDelta`` merged into one per ``window_s`` seconds."""
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                queue.put_nowait(event)
        except Exception as exc:  # handed to the reader, raised there
            queue.put_nowait(exc)
        finally:
            queue.put_nowait(_END)

    reader = asyncio.create_task(pump())
    pending: ModelDelta | None = None
    deadline = 0.0
    try:
        while True:
            if pending is None:
                item = await queue.get()
            else:
                try:
                    item = await asyncio.wait_for(
                        queue.get(), max(0.0, deadline - time.monotonic())
                    )
                except TimeoutError:
                    yield pending
                    pending = None
                    continue
            if isinstance(item, ModelDelta):
                if pending is not None and (pending.turn_id, pending.iteration) == (
                    item.turn_id,
                    item.iteration,
                ):
                    pending = dataclasses.replace(item, text=pending.text + item.text)
                    continue
                if pending is not None:
                    yield pending
                pending, deadline = item, time.monotonic() + window_s
                continue
            if pending is not None:
                yield pending
                pending = None
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, Event)
            yield item
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
