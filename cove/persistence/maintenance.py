"""Operations on a live database from outside its store: a consistent backup, a write probe.

Both use a connection of their own, so they run beside a store (of this or another process)
without stopping its turns: SQLite in WAL mode lets one reader copy a snapshot while writers go
on, and the write probe takes the write lock only for an instant.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from cove.errors import CoveError, StoreError
from cove.persistence.opening import PathKind, classify, identify

#: How long the probe and the backup wait for another connection's write lock.
BUSY_TIMEOUT_MS = 5_000


@dataclass(frozen=True)
class BackupReport:
    """What a backup copied, checked on the copy itself."""

    target: str
    bytes: int
    seconds: float
    integrity: str  # "ok", or what ``PRAGMA integrity_check`` found
    conversations: int
    turns: int
    iterations: int
    blocks: int


def _connect_existing(path: str) -> sqlite3.Connection:
    """A connection to a cove database that must already exist (never creates one)."""
    if classify(path) is not PathKind.FILE:
        raise StoreError(f"there is no cove database at {path}")
    uri = Path(path).resolve().as_uri() + "?mode=rw"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    identify(conn, path)
    return conn


def backup(source: str, target: str) -> BackupReport:
    """Copy the database at ``source`` to the new file ``target``, consistently, while in use.

    The SQLite online backup API copies every page in one step inside one read transaction:
    the copy is the database as of one commit, whatever other connections write meanwhile.
    It is written beside ``target`` and renamed into place only once it passed
    ``PRAGMA integrity_check``, so ``target`` is never a partial copy. The copy holds every
    conversation: it gets the database's permission bits (0600 as cove creates it) before the
    first page is written, whatever the umask.

    Raises:
        CoveError: ``target`` exists or is the source. StoreError: the source is missing, not
            a cove database, or the copy failed its check (nothing is left at ``target``).
    """
    started = time.perf_counter()
    target_path = Path(target)
    if target_path.exists():
        raise CoveError(f"{target} already exists; choose a new file for the backup")
    if target_path.resolve() == Path(source).resolve():
        raise CoveError("the backup target is the database itself")
    partial = target_path.with_name(f".{target_path.name}.partial-{os.getpid()}")
    try:
        with contextlib.closing(_connect_existing(source)) as src:
            _create_private(partial, os.stat(source).st_mode)
            with contextlib.closing(sqlite3.connect(partial, isolation_level=None)) as dst:
                src.backup(dst)  # pages=-1: every page in one step, one snapshot
                report = _check(dst, target, started)
        if report.integrity != "ok":
            raise StoreError(f"the backup of {source} failed its check: {report.integrity}")
        os.replace(partial, target_path)
        return report
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot back up {source} to {target}: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)


def _create_private(path: Path, mode: int) -> None:
    """Create ``path`` empty with the permission bits of ``mode`` exactly (not the umask's)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, mode & 0o777)
    finally:
        os.close(fd)


def _check(conn: sqlite3.Connection, target: str, started: float) -> BackupReport:
    integrity = "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))

    def rows(table: str) -> int:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return BackupReport(
        target=target,
        bytes=int(pages) * int(size),
        seconds=time.perf_counter() - started,
        integrity=integrity,
        conversations=rows("conversation"),
        turns=rows("turn"),
        iterations=rows("iteration"),
        blocks=rows("block"),
    )


def probe_writable(path: str) -> None:
    """Take the database's write lock and give it back at once, writing nothing.

    Raises:
        StoreError: The database cannot be written now (read-only file or directory, a full
            disk, another connection holding the lock past the busy timeout, not cove's).
    """
    try:
        with contextlib.closing(_connect_existing(path)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise StoreError(f"the database {path} cannot be written: {exc}") from exc
