"""Deciding what a database path is and opening it for writing or for reading only.

A path is one of: ``:memory:``; missing (a new file); an empty file; a cove database; or
something cove must refuse without touching it (a directory, a file that is not SQLite, another
application's SQLite database). cove tags its databases with ``PRAGMA application_id``; databases
made before the tag existed are recognised by their migration table and tagged by the next
migration. Read-only opens never write: no WAL switch, no migration, no crash recovery.

Everything here is synchronous: it runs on the connection's own thread while it opens.
"""

from __future__ import annotations

import sqlite3
from enum import Enum
from pathlib import Path
from urllib.parse import quote

from cove.errors import NotADatabase, StoreError
from cove.persistence.connection import MEMORY, check_header, configure, enable_wal
from cove.persistence.migrate import check_supported, latest_version, migrate

#: ``PRAGMA application_id`` of every cove database: "cove" in ASCII.
APPLICATION_ID = 0x636F7665
_FOREIGN = "a SQLite database of another application"


class PathKind(Enum):
    """What a database path holds before cove opens it."""

    MEMORY = "memory"
    MISSING = "missing"
    EMPTY = "empty"
    FILE = "file"


def classify(path: str) -> PathKind:
    """Say what ``path`` holds, refusing what cove must never open.

    Raises:
        NotADatabase: the path is a directory, or a non-empty file that is not SQLite.
    """
    if path == MEMORY:
        return PathKind.MEMORY
    file = Path(path)
    if file.is_dir():
        raise NotADatabase(path, "it is a directory")
    if not file.exists():
        return PathKind.MISSING
    if file.stat().st_size == 0:
        return PathKind.EMPTY
    check_header(path)
    return PathKind.FILE


def identify(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a SQLite database that is not cove's (reads only).

    cove's own: tagged with ``APPLICATION_ID``, or untagged with cove's migration table (made
    before the tag existed). An untagged database with no schema at all is new: cove's to fill.

    Raises:
        NotADatabase: another application's database; it is not modified.
    """
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if app_id == APPLICATION_ID:
        return
    if app_id != 0:
        raise NotADatabase(path, _FOREIGN)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    if not names or {"schema_migrations", "conversation", "turn"} <= names:
        return
    raise NotADatabase(path, _FOREIGN)


def tag(conn: sqlite3.Connection) -> None:
    """Mark the database as cove's; call inside a write transaction."""
    if int(conn.execute("PRAGMA application_id").fetchone()[0]) != APPLICATION_ID:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def open_for_writing(path: str) -> tuple[sqlite3.Connection, int]:
    """Open, check, tag and migrate ``path``; return the connection and its version.

    Crash recovery runs once it is open (``Store.open``).

    Raises:
        NotADatabase, SchemaTooNew: the database is refused; it is not modified.
        sqlite3.Error: the file cannot be opened or written.
    """
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        configure(conn)
        # Identity and version are checked before any write: what is refused stays untouched.
        identify(conn, path)
        check_supported(conn, path)
        enable_wal(conn, path)
        version = migrate(conn, path, before_commit=tag)
        # Checkpoints (which copy pages and fsync) run on a connection of their own beside the
        # writes, never inside a write unit's commit (``sqlite.py``).
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        conn.close()
        raise
    return conn, version


def read_only_uri(path: str, *, immutable: bool) -> str:
    """The URI that opens ``path`` for reading only (``immutable``: as a file nobody writes)."""
    uri = f"file:{quote(str(Path(path).absolute()))}?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def connect_uri(uri: str) -> sqlite3.Connection:
    """A configured connection to a ``file:`` URI (a read-only one: ``open_for_reading``)."""
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_read_only(path: str, *, immutable: bool) -> tuple[sqlite3.Connection, str]:
    uri = read_only_uri(path, immutable=immutable)
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        configure(conn)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn, uri


def open_for_reading(path: str) -> tuple[sqlite3.Connection, str]:
    """Open an existing cove database without writing anything to it.

    A WAL database in a directory nobody may write to cannot get the shared-memory file SQLite
    reads it with; it is then opened as immutable, which is sound because nothing can write it
    there either (a WAL writer needs that same file).

    Returns:
        The connection and the URI it was opened with (to open it so again).

    Raises:
        NotADatabase, SchemaTooNew: refused. SchemaTooOld: it must be upgraded first.
        sqlite3.Error: the file cannot be read.
    """
    try:
        conn, uri = _connect_read_only(path, immutable=False)
    except sqlite3.OperationalError:
        conn, uri = _connect_read_only(path, immutable=True)
    try:
        identify(conn, path)
        found = check_supported(conn, path)
        if found < latest_version():
            raise SchemaTooOld(path, found)
    except BaseException:
        conn.close()
        raise
    return conn, uri


class SchemaTooOld(StoreError):
    """A read-only open found a schema older than this cove reads; it must be upgraded first."""

    def __init__(self, path: str, found: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, older than the version {latest_version()} this "
            "cove reads, and it cannot be upgraded because it is read-only; make it writable and "
            "run any cove command once to upgrade it"
        )
        self.found = found
