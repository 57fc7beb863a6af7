"""Watching and the conversation list: the part of ``Conversations`` channels use
to follow what happens, wherever it runs (see ``watching`` for the machinery)."""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING

from cove.conversation.handle import TurnHandle
from cove.conversation.lease import owner_is_dead
from cove.conversation.watch.hub import WATCH_CAPACITY, Watcher
from cove.conversation.watch.lists import ListWatch
from cove.conversation.watch.stream import WatchStream
from cove.persistence.records import ConversationRecord

if TYPE_CHECKING:
    from cove.conversation.watch.watching import Watching
    from cove.persistence.store import Store


class WatchAPI:
    """``watch`` and ``watch_list``, mixed into ``Conversations``."""

    _store: Store
    _watching: Watching

    @abstractmethod
    def _check_open(self) -> None: ...

    @abstractmethod
    async def get(self, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord: ...

    @abstractmethod
    def send(self, conversation_id: str, text: str, *, owner: str | None = None) -> TurnHandle: ...

    def watch(
        self,
        conversation_id: str,
        after: int | None = None,
        *,
        capacity: int = WATCH_CAPACITY,
        owner: str | None = None,
    ) -> WatchStream:
        """Follow a conversation's events, whoever runs its turns (this process or another).

        ``async with convs.watch(cid) as events: async for event in events: ...`` — or iterate
        it directly. With ``after=N`` the events after seq N come first (from the recent-event
        ring, else rebuilt from the store), then live ones: no duplicates, no gaps. A watcher
        whose ``capacity`` fills up gets one ``Resync`` instead of the events it missed.

        Raises:
            NotFound: Unknown conversation, or not ``owner``'s (when the stream starts).
        """
        self._check_open()
        return WatchStream(
            Watcher(capacity, after),
            lambda watcher: self._start_watch(conversation_id, after, watcher, owner),
        )

    async def _start_watch(
        self, conversation_id: str, after: int | None, watcher: Watcher, owner: str | None
    ) -> None:
        self._check_open()
        record = await self.get(conversation_id, owner=owner)
        await self._watching.attach(record.id, after, watcher, reap=self._reap)

    def watch_list(self, *, owner: str | None = None) -> ListWatch:
        """Follow the conversation list (only ``owner``'s conversations when given).

        Yields ``ConversationChanged`` when a conversation is created, renamed, deleted, or
        starts or ends a turn, in this process or another:
        ``async with convs.watch_list() as changes: async for change in changes: ...``
        """
        self._check_open()
        visible = None if owner is None else (lambda record: record.owner == owner)
        return ListWatch(self._store, self._watching.poller, visible)

    async def _reap(self, record: ConversationRecord) -> None:
        """Interrupt the running turn of a conversation whose process is gone.

        A read-only opening writes nothing: its watchers see the turn end once a process that
        writes (the next one to open the database or take the lease) marks it interrupted.
        """
        if self._store.read_only:
            return
        if await self._store.reap_dead_leases(owner_is_dead) == 0:
            await self._store.interrupt_orphans()
