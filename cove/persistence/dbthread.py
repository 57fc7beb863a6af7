"""The store's own database thread: one sqlite3 connection, one thread, calls run in order.

``sqlite3`` blocks, so the connection lives on a thread of its own and the event loop hands it
whole functions (a write unit is one function: one hand-off, one transaction). Owning the thread
instead of borrowing a library's keeps two promises a library did not: a call whose loop has
closed meanwhile is dropped quietly (no "Event loop is closed" traceback from a stray thread when
an open fails or a command ends), and the thread never outlives the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], "asyncio.Future[Any]"]


class DbThread:
    """A daemon thread that owns one connection and runs submitted functions on it, in order.

    Create with ``await DbThread.start(opener)``; ``opener`` runs on the thread and returns the
    connection (sqlite3 connections belong to the thread that made them).
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._stopped = False
        # Calls handed to the thread whose result the loop has not received yet. Counted on the
        # loop's thread only, so zero means the thread is not touching the connection.
        self._pending = 0

    @classmethod
    async def start(cls, opener: Callable[[], sqlite3.Connection], *, name: str) -> DbThread:
        """Start the thread and open the connection on it.

        Raises:
            Whatever ``opener`` raises (the thread has then ended).
        """
        thread = cls(name)
        thread._thread.start()
        try:
            await thread.call(lambda _conn: thread._open(opener))
        except BaseException:
            thread._stop()
            raise
        return thread

    def _open(self, opener: Callable[[], sqlite3.Connection]) -> None:
        self._conn = opener()

    async def call(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``fn(connection, *args, **kwargs)`` on the thread and return its result.

        A cancelled caller does not stop a call already queued: it still runs (a write unit is
        never half-done), its result is dropped.
        """
        return await self.submit(fn, *args, **kwargs)

    def submit(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> asyncio.Future[T]:
        """Queue ``fn(connection, ...)`` on the thread now; the future gets its result."""
        if self._stopped:
            raise RuntimeError("the database thread has stopped")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending += 1
        self._jobs.put((fn, args, kwargs, future))
        return future

    @property
    def idle(self) -> bool:
        """True when no call is queued or running: the caller's thread may use the connection."""
        return self._pending == 0 and not self._stopped and self._conn is not None

    def run_here(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``fn(connection, ...)`` on the calling thread; only while ``idle``.

        Saves the two thread wake-ups of a hand-off for a short unit (a small write commits in
        tens of microseconds, less than one wake-up costs on a busy machine).
        """
        if not self.idle or self._conn is None:
            raise RuntimeError("the database thread is busy")
        return fn(self._conn, *args, **kwargs)

    def _settle(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        self._pending -= 1
        if future.cancelled():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, kwargs, future = job
            try:
                value, ok = fn(self._conn, *args, **kwargs), True
            except BaseException as exc:  # handed to the caller, whatever it is
                value, ok = exc, False
            # RuntimeError: the caller's event loop has closed; nobody waits for this any more.
            with contextlib.suppress(RuntimeError):
                future.get_loop().call_soon_threadsafe(self._settle, future, ok, value)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._jobs.put(None)

    async def close(self) -> None:
        """Close the connection (after every queued call) and end the thread. Idempotent."""
        if self._stopped:
            return
        self._stop()
        await asyncio.to_thread(self._thread.join)
