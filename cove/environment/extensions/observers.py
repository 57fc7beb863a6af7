"""Extensions observing events: ``Extension.observe`` sees the events of its conversation's turns
(all but the streamed ``ModelDelta``s, which the conversation layer merges before numbering).

Each observing extension of an environment gets its own queue and task: ``deliver`` never
waits (a turn is never held up by an observer), each observer sees the events in the order
they were published, and one observer's failure or slowness touches no other. An observer
that falls ``MAX_PENDING`` events behind loses the newer ones (counted in ``dropped`` and
logged once). Closing gives the observers ``CLOSE_GRACE_S`` to finish what they were handed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Sequence

from cove.environment.extensions.base import Extension, Observer
from cove.events import Event

log = logging.getLogger(__name__)

#: Events an observer may fall behind by before newer ones are dropped for it.
MAX_PENDING = 10_000
#: How long closing waits for the observers to finish the events they were handed.
CLOSE_GRACE_S = 2.0


class _Observing:
    """One extension's observer: its queue and the task handing events to it."""

    def __init__(self, name: str, observe: Observer) -> None:
        self.name = name
        self.observe = observe
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=MAX_PENDING)
        self.task: asyncio.Task[None] | None = None
        self.dropped = 0

    def hand(self, event: Event) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            if not self.dropped:
                log.warning("extension %s observes too slowly: events are dropped", self.name)
            self.dropped += 1

    async def _run(self) -> None:
        while (event := await self.queue.get()) is not None:
            try:
                result = self.observe(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("extension %s failed observing %s", self.name, event.type)


class EventObservers:
    """The event observers of one environment's extensions."""

    def __init__(self, extensions: Sequence[Extension]) -> None:
        self._observing = [_Observing(e.name, e.observe) for e in extensions if e.observe]

    @property
    def dropped(self) -> int:
        """Events dropped for observers that fell too far behind."""
        return sum(o.dropped for o in self._observing)

    def deliver(self, event: Event) -> None:
        """Hand ``event`` to every observer (never waits)."""
        for observing in self._observing:
            observing.hand(event)

    async def aclose(self) -> None:
        """Let the observers finish what they were handed (``CLOSE_GRACE_S`` at most), then
        stop them."""
        tasks = [o.task for o in self._observing if o.task is not None]
        for observing in self._observing:
            with contextlib.suppress(asyncio.QueueFull):
                observing.queue.put_nowait(None)
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=CLOSE_GRACE_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
