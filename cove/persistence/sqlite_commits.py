"""Noticing commits that any process makes to a SQLite file, by polling ``PRAGMA data_version``.

The poll runs on a read connection of its own (an aiosqlite thread, a few microseconds a poll),
only while someone in this process follows the database: often while commits come, less once it
has been quiet for ``QUIET_AFTER_S`` (a first commit still shows well within 250 ms).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import aiosqlite

from cove.persistence.commit_signal import CommitSignal
from cove.persistence.connection import MEMORY
from cove.persistence.sqlite_threads import close_connection, reader, start_connection

POLL_INTERVAL_S = 0.05
QUIET_POLL_INTERVAL_S = 0.15
QUIET_AFTER_S = 2.0


class CommitPoller(CommitSignal):
    """Tells waiters that some connection committed to the database file (``Commits``)."""

    def __init__(
        self,
        path: str,
        interval_s: float = POLL_INTERVAL_S,
        quiet_interval_s: float = QUIET_POLL_INTERVAL_S,
    ) -> None:
        super().__init__()
        self._path = path
        self._interval = interval_s
        self._quiet_interval = quiet_interval_s
        self._conn: aiosqlite.Connection | None = None
        self.polls = 0

    def _watchable(self) -> bool:
        return self._path != MEMORY

    async def _watch(self) -> None:
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
            self._conn = await start_connection(reader(self._path))
        rows = await self._conn.execute_fetchall("PRAGMA data_version")
        return int(next(iter(rows))[0])

    async def aclose(self) -> None:
        """Stop polling and close the read connection."""
        await self._stop()
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await close_connection(conn)
