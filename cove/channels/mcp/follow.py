"""Following the turn a tool call started, to its end.

The call reads its ``TurnHandle``'s events, tells the client how the turn gets on (progress
notifications: the queue, each iteration, each block) and keeps what its result shows. When the
client cancels the call — or goes away — the turn is cancelled with it: a running block is
killed and the turn is recorded ``cancelled``, as a cancel from any channel would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from cove.conversation import TurnHandle
from cove.errors import CoveError
from cove.events import (
    BlockFinished,
    BlockStarted,
    Event,
    IterationStarted,
    TurnFinished,
    TurnQueued,
    TurnStarted,
    VarsChanged,
)
from cove.results import BlockResult, VarVersion

#: Sends one progress notification: (progress, total, message).
Report = Callable[[float, float | None, str], Awaitable[None]]


@dataclass
class Seen:
    """What a call saw of its turn: its position, blocks, variable versions and end."""

    conversation_id: str
    position: int | None = None
    iterations: int = 0
    blocks: list[BlockResult] = field(default_factory=list)
    changes: list[VarVersion] = field(default_factory=list)
    finished: TurnFinished | None = None

    def note(self, event: Event) -> None:
        """Keep what the result needs from one event."""
        if isinstance(event, TurnStarted):
            self.position = event.position
        elif isinstance(event, IterationStarted):
            self.iterations = event.iteration
        elif isinstance(event, BlockFinished):
            self.blocks.append(event.block)
        elif isinstance(event, VarsChanged):
            self.changes.extend(event.changes)
        elif isinstance(event, TurnFinished):
            self.finished = event

    @property
    def end(self) -> TurnFinished:
        """The turn's ``TurnFinished``.

        Raises:
            CoveError: The stream ended without one.
        """
        if self.finished is None:
            raise CoveError(f"the turn in conversation {self.conversation_id} did not finish")
        return self.finished


def progress_of(event: Event) -> tuple[float, float | None, str] | None:
    """The progress notification an event gives, if any: (progress, total, message).

    Progress only grows: 0 while the turn waits, the iteration's number as each begins (of the
    turn's budget), then a part of the step to the next for each of its blocks that starts.
    """
    if isinstance(event, TurnQueued):
        return 0, None, "waiting for the turn running in this conversation"
    if isinstance(event, IterationStarted):
        return event.iteration, event.budget, f"iteration {event.iteration} of {event.budget}"
    if isinstance(event, BlockStarted):
        step = event.iteration + 1 - 1 / (event.index + 1)
        return step, None, f"iteration {event.iteration}: running block {event.index}"
    return None


async def follow(handle: TurnHandle, report: Report) -> Seen:
    """Read a turn's events to its end, reporting progress; cancel the turn if the call ends
    first (the client cancelled it, or went away).

    Raises:
        CoveError: The turn could not start (unknown conversation, busy, no model endpoint).
    """
    seen = Seen(handle.conversation_id)
    try:
        async for event in handle:
            seen.note(event)
            step = progress_of(event)
            if step is not None:
                await report(*step)
    except BaseException:
        # Shielded: the call is being cancelled, the turn must still be stopped and recorded.
        with anyio.CancelScope(shield=True):
            await handle.cancel()
            await handle.wait()
        raise
    seen.conversation_id = handle.conversation_id
    return seen
