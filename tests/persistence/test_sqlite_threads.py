"""A connection's thread never outlives a cancelled open (it would answer on a closed loop)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cove.persistence.sqlite_threads import reader, start_connection


def connection_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]


def slow(
    opener: Callable[[], sqlite3.Connection], delay_s: float
) -> Callable[[], sqlite3.Connection]:
    def open_() -> sqlite3.Connection:
        time.sleep(delay_s)
        return opener()

    return open_


async def test_a_cancelled_open_closes_the_connection_and_ends_its_thread(tmp_path: Path) -> None:
    before = connection_threads()
    opening = asyncio.ensure_future(start_connection(slow(reader(str(tmp_path / "a.db")), 0.3)))
    await asyncio.sleep(0.05)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    assert connection_threads() == before


async def test_an_open_that_fails_ends_its_thread(tmp_path: Path) -> None:
    before = connection_threads()
    with pytest.raises(sqlite3.OperationalError):
        await start_connection(reader(str(tmp_path / "no such directory" / "a.db")))
    assert connection_threads() == before
