"""``WatchStream``: what ``Conversations.watch`` returns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType

from cove.conversation.watch.hub import Watcher
from cove.events import Event


class WatchStream:
    """An async iterator of one conversation's events; also ``async with``.

    The watcher attaches when the stream starts (``async with``, ``await stream.start()`` or the
    first ``async for`` step) and leaves on ``aclose``.
    """

    def __init__(self, watcher: Watcher, attach: Callable[[Watcher], Awaitable[None]]) -> None:
        self.watcher = watcher
        self._attach = attach
        self._started = False

    async def start(self) -> WatchStream:
        """Attach now (idempotent); events published from here on are not missed.

        Raises:
            NotFound: The conversation is unknown (or not the watching owner's).
        """
        if not self._started:
            self._started = True
            try:
                await self._attach(self.watcher)
            except BaseException:
                await self.watcher.aclose()
                raise
        return self

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        await self.start()
        return await self.watcher.__anext__()

    def take(self, limit: int) -> list[Event]:
        """Up to ``limit`` events that are ready, without waiting (``Watcher.take``); the
        stream must have started."""
        return self.watcher.take(limit)

    def ready(self) -> asyncio.Future[None]:
        """Done once ``take`` has something to give or the stream has ended."""
        return self.watcher.ready()

    async def aclose(self) -> None:
        """Stop watching."""
        self._started = True
        await self.watcher.aclose()

    async def __aenter__(self) -> WatchStream:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
