"""Noticing other nodes' commits on PostgreSQL: ``LISTEN`` as the hint, the sequence as truth.

Every write unit notifies ``cove_commit`` once it has committed. A notification is only a hint:
one sent while the listening connection was down is lost for good. So while someone follows, a
connection of its own listens and also reads the ``cove_commit`` sequence every ``POLL_S``; a
number that moved, a notification, or a reconnection each count as a commit, and a moved number
counts once more on the next read (the number is taken just before its unit commits). Waiters
then read the rows by sequence themselves (``watch.follow``), so nothing rests on the hint alone.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from cove.persistence.commit_signal import CommitSignal

#: How often the listening connection also reads the commit sequence.
POLL_S = 1.0
#: How long to wait before connecting again after the listening connection is lost.
RECONNECT_S = 1.0


class PostgresCommits(CommitSignal):
    """Tells waiters that some node committed (``database.Commits``)."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self._dsn = dsn

    async def _watch(self) -> None:
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
        await self._stop()
