"""Noticing commits that any process makes to a SQLite file, by polling ``PRAGMA data_version``.

The poll runs on a read connection of its own (an aiosqlite thread, a few microseconds a poll),
only while someone in this process follows the database: often while commits come, less once it
has been quiet for ``QUIET_AFTER_S`` (a first commit still shows well within 250 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator

import aiosqlite

from cove.persistence.connection import MEMORY

POLL_INTERVAL_S = 0.05
QUIET_POLL_INTERVAL_S = 0.15
QUIET_AFTER_S = 2.0


class CommitPoller:
    """Tells waiters that some connection committed to the database file (``Commits``)."""

    def __init__(
        self,
        path: str,
        interval_s: float = POLL_INTERVAL_S,
        quiet_interval_s: float = QUIET_POLL_INTERVAL_S,
    ) -> None:
        self._path = path
        self._interval = interval_s
        self._quiet_interval = quiet_interval_s
        self._changed = asyncio.Event()
        self._users = 0
        self._task: asyncio.Task[None] | None = None
        self._conn: aiosqlite.Connection | None = None
        self.polls = 0
        self._version = 0

    @property
    def version(self) -> int:
        """Counts the changes seen; compare with ``wait``'s result."""
        return self._version

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[None]:
        """Keep polling while the body runs (shared by every follower of this process)."""
        self._users += 1
        if self._task is None and self._path != MEMORY:
            self._task = asyncio.create_task(self._poll())
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0 and self._task is not None:
                task, self._task = self._task, None
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

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

    def _notice(self) -> None:
        self._version += 1
        fired, self._changed = self._changed, asyncio.Event()
        fired.set()

    async def _poll(self) -> None:
        last: int | None = None
        changed_at = time.monotonic()
        while True:
            try:
                version: int | None = await self._data_version()
            except (sqlite3.Error, ValueError):
                version = None  # the file is busy or gone; try again next round
            self.polls += 1
            if version is not None and version != last:
                last = version
                changed_at = time.monotonic()
                self._notice()
            quiet = time.monotonic() - changed_at > QUIET_AFTER_S
            await asyncio.sleep(self._quiet_interval if quiet else self._interval)

    async def _data_version(self) -> int:
        if self._conn is None:
            self._conn = await aiosqlite.connect(self._path, isolation_level=None)
        rows = await self._conn.execute_fetchall("PRAGMA data_version")
        return int(next(iter(rows))[0])

    async def aclose(self) -> None:
        """Stop polling and close the read connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()
