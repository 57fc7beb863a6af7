"""``TurnHandle``: what ``Conversations.send`` returns.

Iterate it for the sender's own stream (``TurnQueued`` if it had to wait, then the turn's
events, ending with ``TurnFinished``); ``cancel`` stops the turn, or withdraws it while it still
waits behind another. The turn runs in a task the handle holds, so it keeps running when
nobody reads the stream, and ``Conversations.aclose`` waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from cove.conversation.watch.hub import Watcher
from cove.errors import CoveError
from cove.events import Event, TurnFinished
from cove.results import TurnOutcome

if TYPE_CHECKING:
    from cove.engine.query import Query

#: Events a sender may leave unread before it is resynced (deltas of a long turn add up).
SEND_CAPACITY = 1 << 16

WITHDRAWN = "the turn was withdrawn before it started"


class TurnHandle:
    """One sent turn: an async iterator of its events, with ``cancel`` and ``finished``."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.watcher = Watcher(SEND_CAPACITY)
        self.task: asyncio.Task[None] | None = None
        self.query: Query | None = None
        self.started = False  # the turn left the queue and runs (or ran)
        self.withdrawn = False
        self.refused: CoveError | None = None  # why it was refused while it waited
        self._finished: TurnFinished | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        event = await self.watcher.__anext__()
        if isinstance(event, TurnFinished):
            self._finished = event
        return event

    @property
    def running(self) -> bool:
        """True while its turn runs (it left the queue and holds the conversation's lease)."""
        return self.query is not None

    async def cancel(self) -> bool:
        """Cancel the turn: stop it if it runs, withdraw it if it waits. False if it ended."""
        if self.task is None or self.task.done():
            return False
        if self.query is not None:
            await self.query.cancel()
            return True
        if self.started:
            return False  # between its end and the task's end
        self.withdrawn = True
        self.task.cancel()
        return True

    async def finished(self) -> TurnFinished:
        """Read the rest of the stream and return the turn's ``TurnFinished``.

        Raises:
            CoveError: The stream ended without one (it failed before the turn started).
        """
        async for _ in self:
            pass
        if self._finished is None:
            raise CoveError(f"the turn in conversation {self.conversation_id} did not finish")
        return self._finished

    async def aclose(self) -> None:
        """Stop reading (the turn goes on; use ``cancel`` to stop it)."""
        await self.watcher.aclose()

    async def wait(self) -> None:
        """Wait until the turn's task has ended, without reading its events."""
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self.task)


def withdrawn_event(conversation_id: str) -> TurnFinished:
    """The end of a stream whose turn never started."""
    return TurnFinished(
        turn_id=0,
        outcome=TurnOutcome("cancelled", error=WITHDRAWN),
        iterations=0,
        duration_ms=0.0,
        conversation_id=conversation_id,
    )
