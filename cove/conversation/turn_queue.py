"""First come, first served: one turn at a time per conversation, in the order sends arrived."""

from __future__ import annotations

import asyncio
from collections import deque


class TurnQueue:
    """The turns waiting in one conversation; the head of the queue is the running one.

    ``join`` and ``leave`` are synchronous, so joining happens in call order and leaving is safe
    in a ``finally`` even when a waiting send is cancelled.
    """

    def __init__(self) -> None:
        self._tickets: deque[asyncio.Event] = deque()
        self.emptied = asyncio.Event()
        """Set once every turn has left."""
        self.finished = False
        """The running turn has published its end (what is left of it is clean-up)."""

    @property
    def busy(self) -> bool:
        """True while a turn runs or waits."""
        return bool(self._tickets)

    def join(self) -> asyncio.Event:
        """Take a place in the queue; the returned event is set when it is this turn's go."""
        ticket = asyncio.Event()
        if not self._tickets:
            ticket.set()
        self._tickets.append(ticket)
        return ticket

    def leave(self, ticket: asyncio.Event) -> None:
        """Give up a place (finished, failed or cancelled); the next turn may start."""
        was_head = bool(self._tickets) and self._tickets[0] is ticket
        self._tickets.remove(ticket)
        if was_head:
            self.finished = False
        if was_head and self._tickets:
            self._tickets[0].set()
        if not self._tickets:
            self.emptied.set()

    @property
    def ending(self) -> bool:
        """True when the only turn left has published its end and is letting go of the lease."""
        return self.finished and len(self._tickets) == 1
