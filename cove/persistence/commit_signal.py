"""What the backends' commit watchers share: a version that counts commits noticed, waiters
woken when it moves, and one background watch kept while anyone in this process follows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class CommitSignal:
    """Counts the commits a backend's watch notices and wakes waiters (``database.Commits``).

    A backend subclasses it with ``_watch``, the coroutine that notices commits and calls
    ``_notice`` for each; it runs while at least one ``use`` is open.
    """

    def __init__(self) -> None:
        self._changed = asyncio.Event()
        self._users = 0
        self._task: asyncio.Task[None] | None = None
        self._version = 0

    @property
    def version(self) -> int:
        """Counts the commits noticed; compare with ``wait``'s result."""
        return self._version

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[None]:
        """Keep the watch running while the body runs (shared by every follower here)."""
        self._users += 1
        if self._task is None and self._watchable():
            self._task = asyncio.create_task(self._watch())
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                await self._stop()

    async def wait(self, seen: int, timeout_s: float) -> int:
        """Wait until a commit newer than version ``seen`` (or ``timeout_s``); the version now.

        Pass the version returned last time, so a commit made while the caller was busy is
        not missed.
        """
        if self._version == seen:
            # Not ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that arrives
            # as the event fires, and a caller cancelled then would go on waiting forever.
            waiting = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait((waiting,), timeout=timeout_s)
            finally:
                waiting.cancel()
        return self._version

    def _notice(self, *_: object) -> None:
        """A commit was noticed: move the version and wake every waiter."""
        self._version += 1
        fired, self._changed = self._changed, asyncio.Event()
        fired.set()

    def _watchable(self) -> bool:
        """Whether there is anything to watch (an in-memory database has no other writer)."""
        return True

    async def _watch(self) -> None:
        raise NotImplementedError

    async def _stop(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
