"""The conversation hubs of one process and the followers that feed them from the database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from cove.conversation.watch.follow import change_markers, follow
from cove.conversation.watch.hub import ConversationHub, Watcher
from cove.conversation.watch.rebuild import latest_seq, rebuild
from cove.conversation.watch.sequence import turn_of
from cove.conversation.watch.wakes import ChangeWakes
from cove.events import Event
from cove.persistence.database import Commits
from cove.persistence.records import ConversationRecord
from cove.persistence.store import Store

#: Idle hubs (no watcher, no turn) kept for their ring buffers; older ones are dropped.
MAX_IDLE_HUBS = 256

Reaper = Callable[[ConversationRecord], Awaitable[None]]
Tap = Callable[[Event], None]

log = logging.getLogger(__name__)


class Watching:
    """Hubs by conversation id; starts a database follower for every watched conversation."""

    def __init__(self, store: Store, poller: Commits) -> None:
        self.store = store
        self.poller = poller
        self._hubs: OrderedDict[str, ConversationHub] = OrderedDict()
        self._followers: dict[str, asyncio.Task[None]] = {}
        self._taps: list[Tap] = []
        self._markers = change_markers(store)
        self._wakes = ChangeWakes(store, poller)

    def observe(self, tap: Tap) -> None:
        """Call ``tap(event)`` for every event a turn run by this process publishes.

        Also for the ``TurnQueued`` notices of sends that wait, and the ``cancelled`` end of
        one withdrawn while waiting (both private to their sender otherwise). Events rebuilt
        from the database (turns of other processes) are not tapped. A tap runs on the
        publishing turn's task, synchronously (a model delta held by the hub's pacing: when it
        is released, possibly from the loop's timer): it must be quick; an exception it raises
        is logged and otherwise ignored.
        """
        self._taps.append(tap)

    def notify(self, event: Event) -> None:
        """Hand an event that is not published through a hub to every tap."""
        self._tap(event)

    def _tap(self, event: Event) -> None:
        for tap in self._taps:
            try:
                tap(event)
            except Exception:
                log.exception("an event observer failed")

    def watcher_count(self) -> int:
        """Watchers attached to the hubs of this process (senders' own streams included)."""
        return sum(len(hub.watchers) for hub in self._hubs.values())

    def hub(self, conversation_id: str) -> ConversationHub:
        """The hub of a conversation, created on first use."""
        hub = self._hubs.get(conversation_id)
        if hub is None:
            hub = self._hubs[conversation_id] = ConversationHub(conversation_id, taps=[self._tap])
            self._trim()
        self._hubs.move_to_end(conversation_id)
        return hub

    def _trim(self) -> None:
        idle = [
            cid
            for cid, hub in self._hubs.items()
            if not hub.watchers and not hub.local_turns and cid not in self._followers
        ]
        for cid in idle[: max(0, len(idle) - MAX_IDLE_HUBS)]:
            del self._hubs[cid]

    async def attach(
        self, conversation_id: str, after: int | None, watcher: Watcher, *, reap: Reaper
    ) -> None:
        """Attach ``watcher`` to the conversation, first queueing what it missed after ``after``."""
        hub = self.hub(conversation_id)
        if hub.local_turns == 0 and not self._following(conversation_id):
            # Nobody kept this hub current: start counting from what the store holds now.
            latest = await self._latest(conversation_id)
            if hub.local_turns == 0:
                hub.advance_to(latest)
        missed = hub.since(after) if after is not None else []
        hub.attach(watcher)
        self._follow(hub, reap)
        if after is not None and missed is None:
            transcript = await self.store.transcript_since(conversation_id, turn_of(after))
            merged: dict[int, Event] = {e.seq: e for e in rebuild(transcript, after)}
            merged.update((e.seq, e) for e in hub.ring if e.seq > after)
            missed = [merged[seq] for seq in sorted(merged)]
        if missed:
            watcher.preload(missed)

    async def _latest(self, conversation_id: str) -> int:
        turns = await self.store.turns(conversation_id)
        if not turns:
            return 0
        return latest_seq(await self.store.transcript_since(conversation_id, turns[-1].position))

    def _following(self, conversation_id: str) -> bool:
        task = self._followers.get(conversation_id)
        return task is not None and not task.done()

    def _follow(self, hub: ConversationHub, reap: Reaper) -> None:
        cid = hub.conversation_id
        if self._following(cid):
            return
        task = asyncio.create_task(follow(hub, self.store, self._markers, self._wakes, reap=reap))
        self._followers[cid] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._followers.get(cid) is finished:
                del self._followers[cid]

        task.add_done_callback(done)
        hub.on_empty = lambda: self._stop_following(cid)

    def _stop_following(self, conversation_id: str) -> None:
        task = self._followers.pop(conversation_id, None)
        if task is not None:
            task.cancel()

    def forget(self, conversation_id: str) -> None:
        """The conversation was deleted: end its watchers and its follower."""
        self._stop_following(conversation_id)
        hub = self._hubs.pop(conversation_id, None)
        if hub is not None:
            hub.close_watchers()

    async def aclose(self) -> None:
        """End every watcher and follower (the commits they waited on are the store's)."""
        for hub in self._hubs.values():
            hub.close_watchers()
        tasks = list(self._followers.values())
        self._followers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._wakes.aclose()
