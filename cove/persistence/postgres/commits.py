"""Commits on PostgreSQL told across nodes: ``NOTIFY`` as the hint, the sequence as truth.

Once a unit that wrote has committed, its process's ``Notifier`` takes a number from the
``cove_commit`` sequence and notifies ``cove_commit``, in a transaction of its own and off the
unit's path: commits made while one notification is on its way are told by the next one, so a
busy node sends far fewer than one per commit. A notification is only a hint: one sent while a
listening connection was down is lost for good, and one a node dies before sending is never
sent. So while someone follows, a connection of its own listens and also reads the sequence
every ``POLL_S``; a number that moved, a notification, or a reconnection each count as a commit.
Waiters then read the rows by sequence themselves (``watch.follow``) and re-read at least every
few seconds, so nothing rests on the hint alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

from cove.persistence.commit_signal import CommitSignal

#: How often the listening connection also reads the commit sequence.
POLL_S = 1.0
#: How long to wait before connecting again after the listening connection is lost.
RECONNECT_S = 1.0
#: How long a notification waits for more commits to tell: one covers them all.
GATHER_S = 0.005
#: The commit number and the hint in one statement, on a connection of its own whose commits
#: do not wait for a WAL flush (nothing rests on a notification's durability).
NOTIFY = "SELECT nextval('cove_commit'), pg_notify('cove_commit', '')"

log = logging.getLogger("cove.store")


class Notifier:
    """Tells other nodes that this process committed: at most one notification on its way,
    sent a moment after the commit that called for it, and one more after it when commits
    were made meanwhile."""

    def __init__(self, dsn: str, errors: tuple[type[BaseException], ...]) -> None:
        self._dsn = dsn
        self._errors = errors
        self._conn: asyncpg.Connection | None = None
        self._due = False
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """A unit committed: notify soon (once the notification on its way, if any, is sent)."""
        self._due = True
        if self._task is None:
            self._task = asyncio.create_task(self._send())

    async def _send(self) -> None:
        try:
            while self._due:
                await asyncio.sleep(GATHER_S)
                self._due = False
                await (await self._connection()).fetchrow(NOTIFY)
        except self._errors as exc:
            # Followers also read the sequence and re-read on their own: a lost hint delays.
            log.debug("could not notify the commits: %s", exc)
            await self._disconnect()
        finally:
            self._task = None

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(
                self._dsn,
                timeout=10,
                server_settings={"application_name": "cove", "synchronous_commit": "off"},
            )
        return self._conn

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(*self._errors):
                await conn.close()

    async def told(self) -> None:
        """Wait until the commits made so far have been told (at once when nothing is due)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def aclose(self) -> None:
        """Send what is due (a process about to end tells of its last commits), then close."""
        await self.told()
        await self._disconnect()


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
            while not conn.is_closed():
                number = int(await conn.fetchval("SELECT last_value FROM cove_commit"))
                if last is not None and number != last:
                    self._notice()
                last = number
                await asyncio.sleep(POLL_S)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()

    async def aclose(self) -> None:
        """Stop listening."""
        await self._stop()
