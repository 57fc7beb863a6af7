"""``ChangeWakes``: the followers of a process woken only when their own conversation changed.

Every commit to the database, by any process, moves the store's commit signal; a follower
waiting on the signal itself would wake for each one, most of them to other conversations
(with a hundred conversations served, a hundred followers woke for every commit and each read
its conversation's change marker). Here one watch per process waits on the signal instead, reads
the change markers of every conversation whose follower waits (``Store.change_markers``: one
statement), and wakes only the followers whose marker is not the one they know.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from cove.persistence.database import Commits
from cove.persistence.store import Store

#: A conversation's change marker (``Store.change_markers``).
Marker = tuple[Any, ...]

#: How long the watch waits for a commit before it reads the markers anyway.
IDLE_READ_S = 5.0


class ChangeWakes:
    """Followers wait in ``changed`` until their conversation's marker moves.

    Attributes:
        commits: The store's commit signal the watch waits on.
    """

    def __init__(self, store: Store, commits: Commits) -> None:
        self._store = store
        self.commits = commits
        self._waiting: dict[str, dict[asyncio.Future[None], Marker | None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def changed(self, conversation_id: str, known: Marker | None, timeout_s: float) -> None:
        """Return once the conversation's marker differs from ``known`` (it changed, or it is
        gone), or after ``timeout_s``.

        ``known`` must have been read after the commits the store's signal had noticed when the
        caller last looked (``Commits.version``): a later commit moves the signal again.
        """
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        waiting = self._waiting.setdefault(conversation_id, {})
        waiting[woken] = known
        self._start()
        timer = loop.call_later(timeout_s, _wake, woken)
        try:
            await woken
        finally:
            timer.cancel()
            del waiting[woken]
            if not waiting and self._waiting.get(conversation_id) is waiting:
                del self._waiting[conversation_id]

    def _start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        """While anyone waits: after each commit, one read of the waiters' markers."""
        try:
            async with self.commits.use():
                seen = self.commits.version
                while self._waiting:
                    seen = await self.commits.wait(seen, IDLE_READ_S)
                    if self._waiting:
                        await self._read()
        finally:
            self._task = None
            if self._waiting and not self._closed:  # came while the watch was ending
                self._start()

    async def _read(self) -> None:
        """Wake the waiters whose conversation's marker is not the one they know."""
        try:
            markers = await self._store.change_markers(list(self._waiting))
        except Exception:  # the store failed: the followers read again themselves and see it
            markers = {}
        for conversation_id, waiting in list(self._waiting.items()):
            marker = markers.get(conversation_id)
            for woken, known in list(waiting.items()):
                if marker is None or marker != known:
                    _wake(woken)

    async def aclose(self) -> None:
        """Stop the watch (its waiters return as at a timeout)."""
        self._closed = True
        for waiting in self._waiting.values():
            for woken in waiting:
                _wake(woken)
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
