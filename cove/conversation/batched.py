"""One read for many waiters: the keys asked for in the same pass of the event loop are read
together.

After a commit every follower of a conversation, and every turn watching for cancel requests,
wakes in the same pass of the loop and asks the store about its own conversation. Asked one by
one, that is a read per waiter per commit — with a hundred conversations, most of the store's
work and much of the process's. ``Batched`` gathers the keys asked for until the loop comes
round, reads them all at once and hands each waiter its answer (or the read's error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from cove.errors import NotFound

T = TypeVar("T")

#: Reads the values of the keys given (a key it does not know is left out).
ReadMany = Callable[[Sequence[str]], Awaitable[dict[str, T]]]


class Batched(Generic[T]):
    """Reads through ``read_many``, gathering the keys asked for in one pass of the loop."""

    def __init__(self, read_many: ReadMany[T], kind: str) -> None:
        self._read_many = read_many
        self._kind = kind
        self._waiting: dict[str, list[asyncio.Future[T]]] = {}
        self._reading: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # held until done

    async def get(self, key: str) -> T:
        """The value of ``key`` read with the others asked for now.

        Raises:
            NotFound: ``read_many`` left the key out.
            CoveError: The read failed (every waiter of the read gets the error).
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        if self._reading is None:
            self._reading = asyncio.create_task(self._read())
            self._tasks.add(self._reading)
            self._reading.add_done_callback(self._tasks.discard)
        return await future

    async def _read(self) -> None:
        futures: list[tuple[str, asyncio.Future[T]]] = []
        try:
            await asyncio.sleep(0)  # the others woken by the same commit ask meanwhile
            futures = self._take()
            found = await self._read_many(list(dict(futures)))
        except Exception as exc:
            for _, future in futures:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:  # cancelled: the loop is closing, nobody is left to answer
            for _, future in futures or self._take():
                future.cancel()
            raise
        for key, future in futures:
            if future.done():  # its waiter was cancelled
                continue
            if key in found:
                future.set_result(found[key])
            else:
                future.set_exception(NotFound(self._kind, key))

    def _take(self) -> list[tuple[str, asyncio.Future[T]]]:
        """The waiters so far, each with its key; the next ``get`` starts a new read."""
        waiting, self._waiting, self._reading = self._waiting, {}, None
        return [(key, future) for key, futures in waiting.items() for future in futures]
