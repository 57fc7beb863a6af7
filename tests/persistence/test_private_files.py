"""The database is private to its user: directory ``0700``, database, WAL and SHM ``0600``."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from cove.persistence.store import Store


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_a_new_database_and_its_directory_are_private(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "data" / "cove.db"
    async with Store.open(path) as store:
        await store.create_conversation(channel="cli", title="private")
        wal, shm = f"{path}-wal", f"{path}-shm"  # present: the connection is still open
        assert (mode(path.parent), mode(path), mode(wal), mode(shm)) == (0o700, 0o600, 0o600, 0o600)


async def test_an_existing_open_database_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    async with Store.open(path) as store:
        await store.create_conversation(channel="cli", title="older")
    os.chmod(path, 0o644)
    async with Store.open(path) as store:
        assert len(await store.list_conversations(limit=10)) == 1
        assert mode(path) == 0o600 and mode(f"{path}-wal") == 0o600


async def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)  # the user's own choice for a directory that exists already
    path = tmp_path / "cove.db"
    with sqlite3.connect(path):
        pass
    async with Store.open(path):
        assert mode(tmp_path) == 0o755 and mode(path) == 0o600
