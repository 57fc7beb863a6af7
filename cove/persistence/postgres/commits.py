"""Noticing other nodes' commits on PostgreSQL: ``LISTEN`` as the hint, the sequence as truth.

Every write unit notifies ``cove_commit`` as it commits. A notification is only a hint: one sent
while the listening connection was down is lost for good. So while someone follows, a connection
of its own listens and also reads the ``cove_commit`` sequence every ``POLL_S``; a number that
moved, a notification, or a reconnection each count as a commit, and a moved number counts once
more on the next read (the number is taken just before its unit commits). Waiters then read the
rows by sequence themselves (``watch.follow``), so nothing rests on the hint alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg

#: How often the listening connection also reads the commit sequence.
POLL_S = 1.0
#: How long to wait before connecting again after the listening connection is lost.
RECONNECT_S = 1.0


class PostgresCommits:
    """Tells waiters that some node committed (``database.Commits``)."""

    def __init__(self, dsn: str, location: str) -> None:
        self._dsn = dsn
        self._location = location
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
        """Listen while the body runs (shared by every follower of this process)."""
        self._users += 1
        if self._task is None:
            self._task = asyncio.create_task(self._listen())
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
        """Wait for a commit newer than version ``seen`` (or ``timeout_s``); the version now."""
        if self._version == seen:
            waiting = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait((waiting,), timeout=timeout_s)
            finally:
                waiting.cancel()
        return self._version

    def _notice(self, *_: object) -> None:
        self._version += 1
        fired, self._changed = self._changed, asyncio.Event()
        fired.set()

    async def _listen(self) -> None:
        while True:
            # The server went away or refused: what was missed is noticed below.
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await self._listen_once()
            self._notice()
            await asyncio.sleep(RECONNECT_S)

    async def _listen_once(self) -> None:
        conn = await asyncpg.connect(self._dsn, timeout=10)
        try:
            await conn.add_listener("cove_commit", self._notice)
            last: int | None = None
            settle = False
            while not conn.is_closed():
                number = int(await conn.fetchval("SELECT last_value FROM cove_commit"))
                if settle or (last is not None and number != last):
                    self._notice()
                settle = last is not None and number != last
                last = number
                await asyncio.sleep(POLL_S)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()

    async def aclose(self) -> None:
        """Stop listening."""
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
