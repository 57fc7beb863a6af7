"""Opening the SQLite file and running write units as ``BEGIN IMMEDIATE`` transactions.

Everything here is synchronous and runs on the store's connection thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from cove.errors import NotADatabase

T = TypeVar("T")

MEMORY = ":memory:"
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5000
# Encoded values larger than this many bytes go to the blob table instead of inline.
INLINE_LIMIT = 4096


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


class WriteLockBusy(sqlite3.OperationalError):
    """``BEGIN IMMEDIATE`` found the write lock taken for longer than the busy timeout.

    Raised before the transaction began, so nothing was written: the unit may be retried.
    """


def without_waiting(conn: sqlite3.Connection, fn: Callable[..., T], *args: object) -> T:
    """Run ``fn(conn, *args)`` with no busy wait: a held write lock raises ``WriteLockBusy``."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        return fn(conn, *args)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def configure(conn: sqlite3.Connection) -> None:
    """Apply cove's per-connection pragmas and row factory."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.row_factory = sqlite3.Row


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


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the body as one ``BEGIN IMMEDIATE`` transaction; roll back on any exception.

    IMMEDIATE takes the write lock up front, so a concurrent writer waits (``busy_timeout``)
    at BEGIN instead of failing half-way through with a lock upgrade error.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise WriteLockBusy(str(exc)) from exc
        raise
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def put_blob(conn: sqlite3.Connection, data: bytes) -> str:
    """Store ``data`` once by content and return its sha256 hex hash."""
    digest = hashlib.sha256(data).hexdigest()
    conn.execute("INSERT OR IGNORE INTO blob (hash, data) VALUES (?, ?)", (digest, data))
    return digest


def put_encoded(conn: sqlite3.Connection, encoded: str | None) -> tuple[str | None, str | None]:
    """Split an encoded value into (inline text, blob hash); exactly one is set unless None."""
    if encoded is None:
        return None, None
    data = encoded.encode()
    if len(data) <= INLINE_LIMIT:
        return encoded, None
    return None, put_blob(conn, data)


def collect_blobs(conn: sqlite3.Connection, hashes: set[str]) -> int:
    """Delete the given blobs that nothing references any more; return how many went."""
    removed = 0
    for digest in hashes:
        cursor = conn.execute(
            """
            DELETE FROM blob WHERE hash = ?1
              AND NOT EXISTS (SELECT 1 FROM iteration WHERE system_prompt_hash = ?1)
              AND NOT EXISTS (SELECT 1 FROM block WHERE result_blob = ?1)
              AND NOT EXISTS (SELECT 1 FROM var_version WHERE encoded_blob = ?1)
              AND NOT EXISTS (SELECT 1 FROM block_figure WHERE digest = ?1)
            """,
            (digest,),
        )
        removed += cursor.rowcount
    return removed
