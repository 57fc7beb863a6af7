"""Live environments: an LRU cache bounded by count and by memory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from cove.environment.environment import Environment

log = logging.getLogger("cove.conversation")

#: An entry's memory is measured again when a use ends at least this long after the last
#: measure: reading a worker's PSS walks its page tables (a few ms of the host's CPU with the
#: data libraries loaded), too much to pay at the end of every turn.
MEASURE_EVERY_S = 30.0


@dataclass
class LiveConversation:
    """One conversation's live environment."""

    conversation_id: str
    env: Environment
    users: int = 0  # turns using this entry; never evicted while > 0
    memory: int = 0  # bytes its worker took (PSS) when last measured, at the end of a use
    measured_at: float | None = None  # when (monotonic); None: not since its worker started


class LiveCache:
    """At most ``capacity`` live environments; the least recently used idle one is evicted.

    When every live environment is in use, a conversation that needs a new one waits until one
    becomes idle, so the bound holds under any load. An evicted environment is closed outside
    the cache-wide lock, by the conversation that needs its slot, so a slow close holds up only
    that conversation; one whose environment is still closing waits before opening a new one.

    With a ``memory_budget``, an entry's memory is measured (``measure``: its worker's PSS) when
    its first use ends and then when a use ends ``measure_every_s`` or more after the last
    measure; while the live entries take more than the budget, the least recently used idle
    ones (never the one just used) are evicted and closed in the background.
    """

    def __init__(
        self,
        capacity: int,
        opener: Callable[[str], Awaitable[Environment]],
        memory_budget: int | None = None,
        measure: Callable[[Environment], int | None] | None = None,
        measure_every_s: float = MEASURE_EVERY_S,
    ) -> None:
        self.capacity = capacity
        self.measure_every_s = measure_every_s
        self.memory_budget = memory_budget
        self._measure = measure
        self._opener = opener
        self._entries: OrderedDict[str, LiveConversation] = OrderedDict()
        self._opening: set[str] = set()
        self._closing: set[str] = set()  # evicted or dropped, environment still closing
        self._background: set[asyncio.Task[None]] = set()  # closes of entries over the budget
        self._changed = asyncio.Condition()
        self.peak = 0
        self.evicted_for_memory = 0

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[LiveConversation]:
        """Every live entry, least recently used first."""
        return list(self._entries.values())

    def get(self, conversation_id: str) -> LiveConversation | None:
        """The live entry of a conversation, if it has one."""
        return self._entries.get(conversation_id)

    def memory(self) -> int:
        """The bytes the live entries took when last measured."""
        return sum(entry.memory for entry in self._entries.values())

    @contextlib.asynccontextmanager
    async def use(self, conversation_id: str) -> AsyncIterator[LiveConversation]:
        """Hold a conversation's live entry (opening its environment if needed) for the body."""
        entry = await self._acquire(conversation_id)
        try:
            yield entry
        finally:
            entry.users -= 1
            self._measure_if_due(entry)
            async with self._changed:
                victims = self._over_budget(entry)
                self._changed.notify_all()
            for victim in victims:
                task = asyncio.create_task(self._close_logged(victim))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    def _measure_if_due(self, entry: LiveConversation) -> None:
        if self._measure is None:
            return
        now = time.monotonic()
        if entry.measured_at is None or now - entry.measured_at >= self.measure_every_s:
            entry.memory = self._measure(entry.env) or 0
            entry.measured_at = now

    def _over_budget(self, kept: LiveConversation) -> list[LiveConversation]:
        """Under the lock: take out the least recently used idle entries (not ``kept``) while
        the live ones take more than the memory budget; they are marked closing."""
        if self.memory_budget is None:
            return []
        total = self.memory()
        victims = []
        for entry in list(self._entries.values()):
            if total <= self.memory_budget:
                break
            if entry is kept or entry.users:
                continue
            del self._entries[entry.conversation_id]
            self._closing.add(entry.conversation_id)
            total -= entry.memory
            victims.append(entry)
        self.evicted_for_memory += len(victims)
        return victims

    async def _acquire(self, conversation_id: str) -> LiveConversation:
        async with self._changed:
            entry, victim = await self._claim(conversation_id)
        if entry is not None:
            return entry
        try:
            if victim is not None:
                # Closed outside the lock: other conversations keep using the cache meanwhile.
                await self._close(victim)
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

    async def _claim(
        self, conversation_id: str
    ) -> tuple[LiveConversation | None, LiveConversation | None]:
        """Under the lock: the live entry, or a slot reserved for opening one.

        Returns:
            ``(entry, None)`` when the conversation is live (now used once more), else
            ``(None, victim)`` with the slot reserved: ``victim`` is the idle entry evicted to
            make room (the caller closes it before opening), or None when a slot was free.
        """
        while True:
            entry = self._entries.get(conversation_id)
            if entry is not None:
                entry.users += 1
                self._entries.move_to_end(conversation_id)
                return entry, None
            if conversation_id in self._opening or conversation_id in self._closing:
                await self._changed.wait()  # another sender opens it, or its old one is closing
                continue
            victim = None
            if len(self._entries) + len(self._opening) >= self.capacity:
                victim = next((e for e in self._entries.values() if e.users == 0), None)
                if victim is None:
                    await self._changed.wait()
                    continue
                # The victim's slot passes to this conversation, so the bound holds while the
                # victim closes: the new environment opens only after that.
                del self._entries[victim.conversation_id]
                self._closing.add(victim.conversation_id)
            self._opening.add(conversation_id)
            return None, victim

    async def _close_logged(self, entry: LiveConversation) -> None:
        """``_close`` in the background: a failure is logged (the entry is gone either way)."""
        try:
            await self._close(entry)
        except Exception:
            log.exception("closing the environment of %s failed", entry.conversation_id)

    async def _close(self, entry: LiveConversation) -> None:
        """Close an entry taken out of the cache and marked closing, outside the lock."""
        try:
            await entry.env.aclose()
        finally:
            async with self._changed:
                self._closing.discard(entry.conversation_id)
                self._changed.notify_all()

    async def reopen(self, entry: LiveConversation) -> None:
        """Replace the environment of an entry the caller uses with a freshly opened one.

        For a conversation another process changed since the environment was opened: its
        sandbox and variable versions are behind the store. If opening fails the entry leaves
        the cache, so the next use opens it anew.
        """
        await entry.env.aclose()
        entry.measured_at = None  # a new worker: measured when this use ends
        try:
            entry.env = await self._opener(entry.conversation_id)
        except BaseException:
            async with self._changed:
                if self._entries.get(entry.conversation_id) is entry:
                    del self._entries[entry.conversation_id]
                self._changed.notify_all()
            raise

    async def drop(self, conversation_id: str) -> None:
        """Close and forget a conversation's environment (e.g. before deleting it)."""
        async with self._changed:
            entry = self._entries.pop(conversation_id, None)
            if entry is not None:
                self._closing.add(conversation_id)
            self._changed.notify_all()
        if entry is not None:
            await self._close(entry)

    async def aclose(self) -> None:
        """Close every live environment (and wait for those closing in the background)."""
        async with self._changed:
            entries = list(self._entries.values())
            self._entries.clear()
            self._closing.update(e.conversation_id for e in entries)
        for entry in entries:
            await self._close(entry)
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
