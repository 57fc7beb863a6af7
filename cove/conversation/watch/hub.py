"""Fan-out of one conversation's events to any number of watchers, none of which can stall it.

``publish`` is synchronous and never waits: each watcher has its own bounded queue, and a
watcher whose queue is full loses what it had buffered and gets one ``Resync`` instead (reload
from the store, then continue), so a slow or vanished reader costs at most its queue's memory.
Recent events stay in a ring buffer for watchers that resume with ``after=N``. Model deltas
are paced (``coalesce.DeltaPacer``): at most one merged delta per ``DELTA_PACE_S`` reaches the
ring, the taps and the watchers, always before the event that follows it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType

from cove.conversation.watch.coalesce import DELTA_PACE_S, DeltaPacer
from cove.conversation.watch.sequence import Sequencer
from cove.events import Event, ModelDelta, Resync

#: Events a watcher may have waiting before it is resynced.
WATCH_CAPACITY = 1024
#: Recent events kept per conversation for resuming watchers.
RING_CAPACITY = 4096


class Watcher:
    """One observer's bounded queue of events; iterate it (``async for``) to read them.

    Yields events in ``seq`` order without duplicates: anything at or below the last seq it
    delivered (or the ``after`` it was opened with) is skipped.
    """

    def __init__(self, capacity: int = WATCH_CAPACITY, after: int | None = None) -> None:
        if capacity < 2:
            raise ValueError("a watcher needs room for at least two events")
        self.capacity = capacity
        self.last_seq = after if after is not None else -1
        self.resyncs = 0
        self._queue: deque[Event] = deque()
        self._wake = asyncio.Event()
        self._ready: asyncio.Future[None] | None = None  # ``ready``'s, until something comes
        self._closed = False
        self._error: BaseException | None = None
        self._hubs: list[ConversationHub] = []  # the hubs delivering to it

    # -- the publishing side ---------------------------------------------------------------

    def push(self, event: Event) -> None:
        """Queue an event; on overflow drop the backlog for one ``Resync``. Never blocks."""
        if self._closed:
            return
        if len(self._queue) >= self.capacity:
            dropped = self._queue[-1].seq if self._queue else event.seq
            self._queue.clear()
            self.resyncs += 1
            self._queue.append(Resync(conversation_id=event.conversation_id, seq=dropped))
        self._queue.append(event)
        self._notify()

    def preload(self, events: Iterable[Event]) -> None:
        """Put missed events (from the ring or the store) ahead of what arrived live."""
        self._queue.extendleft(reversed(list(events)))
        self._notify()

    def close(self, error: BaseException | None = None) -> None:
        """End the stream after what is queued; ``error`` is raised to the reader then."""
        if not self._closed:
            self._closed, self._error = True, error
            self._notify()

    def _notify(self) -> None:
        self._wake.set()
        if self._ready is not None:
            if not self._ready.done():
                self._ready.set_result(None)
            self._ready = None

    @property
    def closed(self) -> bool:
        """True once the stream was ended by its publisher or its reader."""
        return self._closed

    # -- the reading side ------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        while True:
            event = self._next_queued()
            if event is not None:
                return event
            self._end_if_closed()
            self._wake.clear()
            await self._wake.wait()

    def take(self, limit: int) -> list[Event]:
        """Up to ``limit`` of the events ``__anext__`` would yield now, without waiting.

        Raises:
            StopAsyncIteration: Nothing is queued and the stream has ended.
            BaseException: Nothing is queued and the stream ended with this error.
        """
        taken: list[Event] = []
        while len(taken) < limit and (event := self._next_queued()) is not None:
            taken.append(event)
        if not taken:
            self._end_if_closed()
        return taken

    def ready(self) -> asyncio.Future[None]:
        """A future done once ``take`` has something to give or the stream has ended: a reader
        waits on it beside other things without a task of its own."""
        if self._queue or self._closed:
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        if self._ready is None or self._ready.done():
            self._ready = asyncio.get_running_loop().create_future()
        return self._ready

    def _next_queued(self) -> Event | None:
        """The next queued event to deliver (duplicates skipped), or None when none is."""
        while self._queue:
            event = self._queue.popleft()
            if isinstance(event, Resync):
                self.last_seq = event.seq
                return event
            if event.seq <= self.last_seq and event.seq != 0:
                continue  # already delivered (a live copy of a preloaded event)
            self.last_seq = max(self.last_seq, event.seq)
            return event
        return None

    def _end_if_closed(self) -> None:
        """Raise the stream's end (or its error) once it is closed and drained."""
        if self._closed:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop watching: leave the hub and drop anything queued."""
        self._queue.clear()
        self.close()
        for hub in self._hubs:
            hub.detach(self)
        self._hubs.clear()

    async def __aenter__(self) -> Watcher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ConversationHub:
    """The live event stream of one conversation in this process."""

    def __init__(
        self,
        conversation_id: str,
        ring_capacity: int = RING_CAPACITY,
        taps: Sequence[Callable[[Event], None]] = (),
        delta_pace_s: float = DELTA_PACE_S,
    ) -> None:
        self.conversation_id = conversation_id
        self.taps = taps  # observers of every event a turn of this process publishes
        self.sequencer = Sequencer()
        self.ring: deque[Event] = deque(maxlen=ring_capacity)
        # Weak: a watcher its reader dropped without closing stops costing anything.
        self.watchers: weakref.WeakSet[Watcher] = weakref.WeakSet()
        self.local_turns = 0  # turns of this conversation running in this process
        self._no_local_turn = asyncio.Event()
        self._no_local_turn.set()
        self.on_empty: Callable[[], None] | None = None  # called when the last watcher leaves
        self.deltas = DeltaPacer(self._publish, delta_pace_s)

    @property
    def last_seq(self) -> int:
        """The newest seq published (or known from the store)."""
        return self.sequencer.last

    def advance_to(self, seq: int) -> None:
        """Note that everything up to ``seq`` already happened (read from the store).

        Events skipped this way never passed through the ring, so it no longer covers a
        contiguous stretch: it is emptied, and resuming watchers are served from the store.
        """
        if seq > self.sequencer.last:
            self.ring.clear()
            self.sequencer.last = seq

    def turn_started(self) -> None:
        """A turn of this process starts (before its first commit): it publishes its events
        itself, so the follower stands by until ``no_local_turn``."""
        self.local_turns += 1
        self._no_local_turn.clear()

    def turn_ended(self) -> None:
        """A turn of this process ended (``turn_started``)."""
        self.local_turns -= 1
        if self.local_turns == 0:
            self._no_local_turn.set()

    async def no_local_turn(self) -> None:
        """Return once no turn of this conversation runs in this process."""
        await self._no_local_turn.wait()

    def attach(self, watcher: Watcher) -> None:
        """Start delivering new events to ``watcher``."""
        self.watchers.add(watcher)
        watcher._hubs.append(self)

    def detach(self, watcher: Watcher) -> None:
        """Stop delivering to ``watcher``."""
        self.watchers.discard(watcher)
        if not self.watchers and self.on_empty is not None:
            self.on_empty()

    def since(self, after: int) -> list[Event] | None:
        """The ring's events after ``after``, or None when the ring no longer reaches back."""
        if after >= self.last_seq:
            return []
        if not self.ring or self.ring[0].seq > after:
            return None
        return [event for event in self.ring if event.seq > after]

    def publish(self, event: Event) -> Event | None:
        """Number a live event, keep it and hand it to every watcher; returns it stamped.

        A model delta may be held to be merged with the next ones (see ``DeltaPacer``): it is
        published later, and None is returned for it now.
        """
        if isinstance(event, ModelDelta):
            self.deltas.add(event)
            return None
        self.deltas.flush()
        return self._publish(event)

    def _publish(self, event: Event) -> Event | None:
        seq = self.sequencer.stamp(event)
        if seq is None:
            return None
        stamped = dataclasses.replace(event, conversation_id=self.conversation_id, seq=seq)
        self._deliver(stamped)
        for tap in self.taps:
            tap(stamped)
        return stamped

    def publish_rebuilt(self, event: Event) -> bool:
        """Deliver an event rebuilt from the store, unless its seq was already published."""
        self.deltas.flush()
        if event.seq <= self.sequencer.last:
            return False
        self.sequencer.last = event.seq
        self._deliver(event)
        return True

    def _deliver(self, event: Event) -> None:
        self.ring.append(event)
        for watcher in list(self.watchers):
            if watcher.closed:
                self.watchers.discard(watcher)
            else:
                watcher.push(event)

    def close_watchers(self, error: BaseException | None = None) -> None:
        """End every watcher (the conversation was deleted or the layer is closing)."""
        self.deltas.flush()
        for watcher in list(self.watchers):
            watcher.close(error)
        self.watchers.clear()
