"""``Lanes``: the HTTP clients one model client spreads its concurrent calls over.

The ``openai`` package's HTTP pool (httpcore) looks at every connection it holds each time a
request takes a connection and each time it gives one back, and probing an idle connection's
socket is not cheap: with 100 idle connections in one pool a 6-chunk call took 10.3 ms of CPU
instead of 4.7 (``bench/stream_bench.py``'s figures, issue #29). A service running a hundred
conversations keeps about as many connections. So calls are spread over lanes, each an
``AsyncOpenAI`` with a pool of its own, and a lane carries at most ``CALLS_PER_LANE`` calls at a
time: a pool then holds a few connections whatever the load. A new lane opens only when every
lane is full; one conversation at a time uses one lane, as a single client would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from openai import AsyncOpenAI

#: The most calls one lane (one HTTP pool) carries at once.
CALLS_PER_LANE: Final = 8


@dataclass
class _Lane:
    client: AsyncOpenAI
    calls: int = 0


class Lanes:
    """Clients made by ``make`` on demand, each carrying at most ``per_lane`` calls at once."""

    def __init__(self, make: Callable[[], AsyncOpenAI], per_lane: int = CALLS_PER_LANE) -> None:
        self._make = make
        self._per_lane = per_lane
        self._lanes = [_Lane(make())]

    @property
    def first(self) -> AsyncOpenAI:
        """The first lane's client (for calls outside the lanes' count, like listing models)."""
        return self._lanes[0].client

    def __len__(self) -> int:
        return len(self._lanes)

    @contextlib.contextmanager
    def lane(self) -> Iterator[AsyncOpenAI]:
        """The client of the least busy lane (a new one when all are full) for one call."""
        lane = min(self._lanes, key=_busy)
        if lane.calls >= self._per_lane:
            lane = _Lane(self._make())
            self._lanes.append(lane)
        lane.calls += 1
        try:
            yield lane.client
        finally:
            lane.calls -= 1

    async def aclose(self) -> None:
        """Close every lane's connections."""
        for lane in self._lanes:
            await lane.client.close()


def _busy(lane: _Lane) -> int:
    return lane.calls
