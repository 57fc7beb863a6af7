"""Live environments: an LRU cache with a hard bound."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from cove.environment.environment import Environment


@dataclass
class LiveConversation:
    """One conversation's live environment."""

    conversation_id: str
    env: Environment
    users: int = 0  # turns using this entry; never evicted while > 0


class LiveCache:
    """At most ``capacity`` live environments; the least recently used idle one is evicted.

    When every live environment is in use, a conversation that needs a new one waits until one
    becomes idle, so the bound holds under any load.
    """

    def __init__(self, capacity: int, opener: Callable[[str], Awaitable[Environment]]) -> None:
        self.capacity = capacity
        self._opener = opener
        self._entries: OrderedDict[str, LiveConversation] = OrderedDict()
        self._opening: set[str] = set()
        self._changed = asyncio.Condition()
        self.peak = 0

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[LiveConversation]:
        """Every live entry, least recently used first."""
        return list(self._entries.values())

    def get(self, conversation_id: str) -> LiveConversation | None:
        """The live entry of a conversation, if it has one."""
        return self._entries.get(conversation_id)

    @contextlib.asynccontextmanager
    async def use(self, conversation_id: str) -> AsyncIterator[LiveConversation]:
        """Hold a conversation's live entry (opening its environment if needed) for the body."""
        entry = await self._acquire(conversation_id)
        try:
            yield entry
        finally:
            entry.users -= 1
            async with self._changed:
                self._changed.notify_all()

    async def _acquire(self, conversation_id: str) -> LiveConversation:
        async with self._changed:
            while True:
                entry = self._entries.get(conversation_id)
                if entry is not None:
                    entry.users += 1
                    self._entries.move_to_end(conversation_id)
                    return entry
                if conversation_id in self._opening:  # another sender is opening it
                    await self._changed.wait()
                    continue
                if len(self._entries) + len(self._opening) < self.capacity:
                    break
                victim = next((e for e in self._entries.values() if e.users == 0), None)
                if victim is not None:
                    del self._entries[victim.conversation_id]
                    await victim.env.aclose()
                    continue
                await self._changed.wait()
            self._opening.add(conversation_id)
        try:
            env = await self._opener(conversation_id)
        except BaseException:
            async with self._changed:
                self._opening.discard(conversation_id)
                self._changed.notify_all()
            raise
        async with self._changed:
            # One locked step: the slot moves from "opening" to "live" with no gap between.
            self._opening.discard(conversation_id)
            entry = LiveConversation(conversation_id, env, users=1)
            self._entries[conversation_id] = entry
            self.peak = max(self.peak, len(self._entries))
            self._changed.notify_all()
            return entry

    async def drop(self, conversation_id: str) -> None:
        """Close and forget a conversation's environment (e.g. before deleting it)."""
        async with self._changed:
            entry = self._entries.pop(conversation_id, None)
            self._changed.notify_all()
        if entry is not None:
            await entry.env.aclose()

    async def aclose(self) -> None:
        """Close every live environment."""
        async with self._changed:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            await entry.env.aclose()
