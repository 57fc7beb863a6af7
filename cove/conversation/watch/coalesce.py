"""Pacing model deltas: one merged ``ModelDelta`` per pace at most, nothing lost or reordered.

A model streams its reply a few tokens at a time, and the engine sees every chunk; watchers do
not need to. ``DeltaPacer`` sits where a conversation's events are published (the hub): a
delta that comes less than ``pace_s`` after the last one released is held, and the deltas of
the same iteration that follow are joined to it; the held delta is released when its pace is
up, when a delta of another iteration arrives, and always before any other event, so every
watcher sees the same text in the same order, in fewer events. A delta after a quiet spell
goes out at once. The merged delta is numbered when it is released (its ``seq`` is the next
free step of its iteration, as a single delta's would be).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from cove.events import ModelDelta

#: Watchers get at most one model delta per this many seconds per conversation.
DELTA_PACE_S = 0.05


class DeltaPacer:
    """Holds and merges model deltas until their pace is up (see the module docstring)."""

    def __init__(self, release: Callable[[ModelDelta], object], pace_s: float = DELTA_PACE_S):
        """Pace deltas for ``release``, which gets each merged delta when it is due.

        Args:
            release: Called (synchronously) with each delta to publish.
            pace_s: The least time between two released deltas; 0 releases each at once.
        """
        self.pace_s = pace_s
        self._release = release
        self._held: ModelDelta | None = None
        self._parts: list[str] = []
        self._released_at = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def add(self, delta: ModelDelta) -> None:
        """Take a delta: released now if its pace allows, else held and merged."""
        held = self._held
        if held is not None and (held.turn_id, held.iteration) == (delta.turn_id, delta.iteration):
            self._parts.append(delta.text)
            return
        self.flush()
        self._held, self._parts = delta, [delta.text]
        loop = asyncio.get_running_loop()
        wait = self._released_at + self.pace_s - loop.time()
        if wait <= 0:
            self.flush()
        else:
            self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        """Release the held delta now (before another event, or when its pace is up)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held, self._held = self._held, None
        if held is None:
            return
        text = "".join(self._parts)
        self._parts = []
        self._released_at = asyncio.get_running_loop().time()
        self._release(held if text == held.text else dataclasses.replace(held, text=text))
