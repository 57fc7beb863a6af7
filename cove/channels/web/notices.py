"""Messages from the web channel itself to the pages open on a conversation (relayed on the
conversation's event stream beside its events)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any


class Notices:
    """Messages from the web channel itself to the pages open on a conversation.

    A notice published with a ``key`` is also kept, and handed to each page that starts
    listening, until it is withdrawn (an approval card waiting for its answer).
    """

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self._kept: dict[str, dict[str, dict[str, Any]]] = {}

    @contextlib.contextmanager
    def listen(self, conversation_id: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of the conversation's notices while the body runs (the kept ones first)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=64)
        for notice in self._kept.get(conversation_id, {}).values():
            with contextlib.suppress(asyncio.QueueFull):  # few: one per call waiting
                queue.put_nowait(notice)
        listeners = self._queues.setdefault(conversation_id, set())
        listeners.add(queue)
        try:
            yield queue
        finally:
            listeners.discard(queue)
            if not listeners:
                self._queues.pop(conversation_id, None)

    def publish(
        self, conversation_id: str, notice: dict[str, Any], keep: str | None = None
    ) -> None:
        """Hand ``notice`` to every page listening on the conversation (never blocks); with
        ``keep``, also to pages that start listening before ``withdraw(conversation_id, keep)``."""
        if keep is not None:
            self._kept.setdefault(conversation_id, {})[keep] = notice
        for queue in self._queues.get(conversation_id, ()):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(notice)

    def withdraw(self, conversation_id: str, key: str) -> None:
        """Stop handing the notice kept as ``key`` to pages that start listening."""
        kept = self._kept.get(conversation_id, {})
        kept.pop(key, None)
        if not kept:
            self._kept.pop(conversation_id, None)
