"""Opening a SQLite file: the header check, private modes, pragmas and the WAL switch.

Everything here is synchronous: it runs on the connection's own thread while it opens.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from cove.errors import NotADatabase

MEMORY = ":memory:"
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5000


def check_header(path: str) -> None:
    """Refuse a non-empty file that does not start with the SQLite header.

    Checked before connecting, because SQLite itself would happily treat some foreign files as
    an empty database once a write is attempted, and we promise never to modify them.

    Raises:
        NotADatabase: the file exists, is not empty and is not a SQLite database.
    """
    if path == MEMORY:
        return
    file = Path(path)
    if not file.exists() or file.stat().st_size == 0:
        return
    if file.is_dir():
        raise NotADatabase(path)
    with file.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise NotADatabase(path)


def create_private(path: str) -> None:
    """Make the database private to its user before SQLite opens it.

    A missing directory is created ``0700`` and a missing database file ``0600`` (an empty file
    is an empty database); an existing database file, its WAL and SHM files are tightened to
    ``0600`` when they are this user's. SQLite gives the WAL and SHM files it creates the mode
    of the database file, so no other user (and no sandbox worker) can read them either.
    """
    if path == MEMORY:
        return
    directory = Path(path).parent
    if not directory.exists():
        directory.mkdir(parents=True, mode=0o700)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    for name in (path, f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(OSError):
            info = os.stat(name)
            if info.st_uid == os.geteuid() and info.st_mode & 0o077:
                os.chmod(name, info.st_mode & 0o700)


def configure(conn: sqlite3.Connection) -> None:
    """Apply cove's per-connection pragmas and row factory."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.row_factory = sqlite3.Row


def connect_writer(path: str) -> sqlite3.Connection:
    """``connect`` for the store's writing connection of a database ``open_for_writing``
    prepared: it never checkpoints (checkpoints run on a connection of their own)."""
    conn = connect(path)
    try:
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        conn.close()
        raise
    return conn


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` with cove's pragmas; transactions are managed by hand.

    ``isolation_level=None`` stops the sqlite3 module from opening transactions behind our back,
    so every write unit is exactly the ``BEGIN IMMEDIATE`` ... ``COMMIT`` we issue.
    """
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def enable_wal(conn: sqlite3.Connection, path: str) -> None:
    """Switch a file database to WAL (it persists in the file; a no-op when already set).

    Separate from ``connect`` because it writes the file header: it runs only once the schema
    version has been checked, so a database from a newer cove is never touched.
    """
    if path == MEMORY:
        return
    # Two processes switching a brand-new file to WAL at once can deadlock on its locks;
    # SQLite then answers SQLITE_BUSY at once instead of waiting. The switch is idempotent,
    # so try again for as long as the busy timeout would have waited.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
