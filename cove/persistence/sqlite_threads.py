"""Starting an aiosqlite connection so that no cancellation leaves its thread behind.

A connection's thread starts at once, and the open runs on it. Cancelled while that open runs,
aiosqlite queues the thread's stop without waiting for it, and the thread later answers on an
event loop that may be closed by then (an error raised in that thread, long after). Here the
open is waited for and the connection closed before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable

import aiosqlite


async def start_connection(opener: Callable[[], sqlite3.Connection]) -> aiosqlite.Connection:
    """An open aiosqlite connection whose ``opener`` ran on its thread.

    Raises:
        Whatever ``opener`` raises (the thread is then stopped).
    """
    opening = asyncio.ensure_future(_open(opener))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await close_connection(await opening)
        raise


async def close_connection(conn: aiosqlite.Connection) -> None:
    """Close ``conn`` and wait for its thread to end (it answers the close just before)."""
    try:
        await conn.close()
    finally:
        await asyncio.to_thread(conn._thread.join)


async def _open(opener: Callable[[], sqlite3.Connection]) -> aiosqlite.Connection:
    conn = aiosqlite.Connection(opener, iter_chunk_size=64)
    try:
        return await conn
    except BaseException:
        # aiosqlite queued its thread's stop; wait for the thread to end while the loop it
        # answers on is alive.
        await asyncio.to_thread(conn._thread.join)
        raise


def reader(path: str) -> Callable[[], sqlite3.Connection]:
    """An opener of a plain autocommit connection to ``path`` (as ``aiosqlite.connect``)."""
    return lambda: sqlite3.connect(path, isolation_level=None)
