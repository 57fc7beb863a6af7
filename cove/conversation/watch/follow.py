"""Following turns that another process runs, through the database.

``CommitPoller`` notices commits from any connection by polling ``PRAGMA data_version`` on its
own read connection (a few microseconds, on one helper thread, only while someone follows).
``follow`` rebuilds the conversation's new durable events from the committed rows after each
commit and publishes those past the hub's last seq, so a follower never repeats or skips one;
finer-grained commits (a reply, one block) simply show up sooner. When the turn's lease belongs
to a process that died or lapsed, the turn is marked ``interrupted`` so watchers see it end.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from cove.conversation.lease import owner_is_dead
from cove.conversation.watch.hub import ConversationHub
from cove.conversation.watch.rebuild import rebuild
from cove.conversation.watch.sequence import turn_of
from cove.errors import CoveError, NotFound
from cove.events import TitleChanged
from cove.persistence.connection import MEMORY, connect
from cove.persistence.records import ConversationRecord, Transcript
from cove.persistence.store import Store

#: How often the poller asks SQLite whether anything was committed: often while commits come,
#: less when the database has been quiet for ``QUIET_AFTER_S`` (a first commit still arrives
#: well within 250 ms).
POLL_INTERVAL_S = 0.05
QUIET_POLL_INTERVAL_S = 0.15
QUIET_AFTER_S = 2.0
#: How often a follower checks that a running turn's process is still alive.
LEASE_CHECK_S = 1.0


class CommitPoller:
    """Tells waiters that some connection committed to the database file."""

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
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self.polls = 0
        self.version = 0  # counts the changes seen; compare with ``wait``'s result

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
        if self.version == seen:
            # Not ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that arrives
            # as the event fires, and a caller cancelled then would go on waiting forever.
            waiting = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait((waiting,), timeout=timeout_s)
            finally:
                waiting.cancel()
        return self.version

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="cove-poll")
        last: int | None = None
        changed_at = time.monotonic()
        while True:
            try:
                version = await loop.run_in_executor(self._executor, self._data_version)
            except sqlite3.Error:
                version = None  # the file is busy or gone; try again next round
            self.polls += 1
            if version is not None and version != last:
                last = version
                changed_at = time.monotonic()
                self.version += 1
                fired, self._changed = self._changed, asyncio.Event()
                fired.set()
            quiet = time.monotonic() - changed_at > QUIET_AFTER_S
            await asyncio.sleep(self._quiet_interval if quiet else self._interval)

    def _data_version(self) -> int:
        if self._conn is None:
            self._conn = connect(self._path)
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    async def aclose(self) -> None:
        """Stop polling and close the read connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._executor is not None:
            executor, self._executor = self._executor, None
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await asyncio.get_running_loop().run_in_executor(executor, conn.close)
            executor.shutdown(wait=False)


async def follow(
    hub: ConversationHub,
    store: Store,
    poller: CommitPoller,
    *,
    reap: Callable[[ConversationRecord], Awaitable[None]],
) -> None:
    """Publish into ``hub`` what other processes commit, while it has watchers.

    A database error ends the watchers with it (a watcher must not wait for what cannot come).
    """
    try:
        await _follow(hub, store, poller, reap)
    except CoveError as exc:
        hub.close_watchers(exc)


@dataclass
class _Followed:
    """What a follower remembers between reads of its conversation."""

    title: str | None = None
    next_lease_check: float = 0.0
    marker: tuple[object, ...] | None = None
    running: bool = False

    def wait_s(self) -> float:
        """How long to wait for a commit before looking again."""
        return LEASE_CHECK_S if self.running else 5.0


async def _follow(
    hub: ConversationHub,
    store: Store,
    poller: CommitPoller,
    reap: Callable[[ConversationRecord], Awaitable[None]],
) -> None:
    state = _Followed()
    async with poller.use():
        seen = poller.version
        while hub.watchers:
            if hub.local_turns == 0:
                try:
                    transcript = await _changes(hub, store, state)
                except NotFound:
                    hub.close_watchers()
                    return
                # Re-checked after the read: a turn that started here meanwhile publishes live.
                if transcript is not None and hub.local_turns == 0:
                    stale = _publish(hub, transcript, state)
                    if stale is not None:
                        await reap(stale)
                        continue
            seen = await poller.wait(seen, state.wait_s())


async def _changes(hub: ConversationHub, store: Store, state: _Followed) -> Transcript | None:
    """What was committed since the hub's last event, or None when nothing was.

    Most commits are to other conversations: a cheap check comes first.
    """
    changed = await store.change_marker(hub.conversation_id)
    lease_due = state.running and time.monotonic() >= state.next_lease_check
    if changed == state.marker and not lease_due:
        return None
    state.marker = changed
    return await store.transcript_since(hub.conversation_id, turn_of(hub.last_seq))


def _publish(
    hub: ConversationHub,
    transcript: Transcript,
    state: _Followed,
) -> ConversationRecord | None:
    """Publish the rebuilt events and a title change; returns the conversation when its running
    turn's lease is stale (its process is gone) and it must be reaped."""
    for event in rebuild(transcript, hub.last_seq):
        hub.publish_rebuilt(event)
    conversation = transcript.conversation
    if state.title is not None and conversation.title not in (None, state.title):
        hub.publish(TitleChanged(title=conversation.title or ""))
    state.title = conversation.title
    state.running = bool(transcript.turns) and transcript.turns[-1].status == "running"
    now = time.monotonic()
    if state.running and now >= state.next_lease_check:
        state.next_lease_check = now + LEASE_CHECK_S
        if lease_is_stale(conversation):
            return conversation
    return None


def lease_is_stale(conversation: ConversationRecord) -> bool:
    """True when no live process holds the conversation's lease."""
    owner, until = conversation.lease_owner, conversation.lease_until
    if owner is None or until is None or until <= time.time():
        return True
    return owner_is_dead(owner)
