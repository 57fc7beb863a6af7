"""The SQLite backend, on aiosqlite: one connection, its own thread, units one at a time.

Every statement runs on aiosqlite's thread, never on the event loop's: each unit is sent there
whole and runs to its end (``sqlite_units.py``), so no other unit's statement can land inside
its ``BEGIN IMMEDIATE`` transaction and a unit costs one hop, not one per statement. The
connection is this process's one writer; another process holding the write lock is waited for
up to the busy timeout, on that thread. The connection never checkpoints: every
``CHECKPOINT_EVERY`` write units a second connection runs a PASSIVE checkpoint beside the
writes, so no unit waits for an fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from typing import TypeVar

import aiosqlite

from cove.errors import CoveError, NotADatabase, SchemaTooNew, StoreError
from cove.persistence.access import unreadable, unwritable
from cove.persistence.connection import MEMORY, connect_writer, create_private
from cove.persistence.database import Unit
from cove.persistence.migrate import latest_version
from cove.persistence.opening import (
    PathKind,
    SchemaTooOld,
    classify,
    connect_uri,
    open_for_reading,
    open_for_writing,
)
from cove.persistence.sqlite_commits import CommitPoller
from cove.persistence.sqlite_threads import close_connection, reader, start_connection
from cove.persistence.sqlite_units import ThreadTransactions, drive

#: Write units between two requests for a WAL checkpoint (run off the store's connection).
CHECKPOINT_EVERY = 200

T = TypeVar("T")


class SqliteDatabase:
    """An open SQLite database (``database.Database``)."""

    dialect = ThreadTransactions.dialect
    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(
        self,
        conn: aiosqlite.Connection,
        raw: sqlite3.Connection,
        path: str,
        *,
        version: int,
        read_only: bool,
    ) -> None:
        self._conn = conn
        self._units = ThreadTransactions(raw)
        self._checkpoint_conn: aiosqlite.Connection | None = None
        self._checkpoint: asyncio.Task[None] | None = None
        self._file = None if read_only or path == MEMORY else path
        self.location = path
        self.schema_version = version
        self.read_only = read_only
        self.created = False
        self.shared = path != MEMORY
        self.commits = CommitPoller(path)

    async def run(self, unit: Unit[T]) -> T:
        """Run ``unit`` whole on the connection's thread (``sqlite_units.py``): one hop."""
        before = self._units.committed
        try:
            return await _on_thread(self._conn, drive, unit, self._units)
        finally:
            if self._units.committed // CHECKPOINT_EVERY != before // CHECKPOINT_EVERY:
                self._request_checkpoint()

    def _request_checkpoint(self) -> None:
        """Fold the WAL back into the file on a second connection, beside the writes (requests
        made while one runs are dropped: the next one comes soon)."""
        if self._file is None or (self._checkpoint is not None and not self._checkpoint.done()):
            return
        self._checkpoint = asyncio.ensure_future(self._run_checkpoint(self._file))

    async def _run_checkpoint(self, path: str) -> None:
        # A checkpoint that cannot finish now (a reader holds old pages) is tried next time.
        with contextlib.suppress(sqlite3.Error, ValueError):
            if self._checkpoint_conn is None:
                self._checkpoint_conn = await start_connection(reader(path))
            await self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def aclose(self) -> None:
        """Close the connections (after the checkpoint running, if any)."""
        if self._checkpoint is not None:
            await self._checkpoint
        if self._checkpoint_conn is not None:
            await close_connection(self._checkpoint_conn)
        await self.commits.aclose()
        await close_connection(self._conn)


async def _on_thread(conn: aiosqlite.Connection, fn: Callable[..., T], *args: object) -> T:
    """Run ``fn(*args)`` on ``conn``'s thread, queued after what was sent to it before.

    aiosqlite sends each of its own calls through this one queue; a whole unit goes through it
    here the same way (``Connection._execute``, the one entry point it has for that).
    """
    result: T = await conn._execute(fn, *args)  # type: ignore[no-untyped-call]
    return result


async def _connect(
    opener: Callable[[], sqlite3.Connection], target: str
) -> tuple[aiosqlite.Connection, sqlite3.Connection]:
    """Start an aiosqlite connection whose ``opener`` runs on its thread; it and the
    ``sqlite3`` connection it wraps (which units use, on that thread only)."""
    opened: list[sqlite3.Connection] = []

    def open_() -> sqlite3.Connection:
        opened.append(opener())
        return opened[-1]

    try:
        return await start_connection(open_), opened[-1]
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open database {target}: {exc}") from exc


def _prepare(target: str, read_only: bool) -> tuple[int, str | None]:
    """Check (and, to write, migrate) a database file on a connection that is then closed:
    its schema version, and the URI of a read-only open."""
    if read_only:
        conn, uri = open_for_reading(target)
        conn.close()
        return latest_version(), uri
    conn, version = open_for_writing(target)
    conn.close()
    return version, None


async def _start(target: str, *, read_only: bool) -> SqliteDatabase:
    """Open ``target``: a file is checked and migrated first, off the event loop, on a
    connection of its own (a refusal then leaves no connection thread behind); a private
    in-memory database exists only on its one connection, so it is migrated there."""
    if target == MEMORY:
        version = latest_version()

        def in_memory() -> sqlite3.Connection:
            nonlocal version
            conn, version = open_for_writing(MEMORY)
            return conn

        conn, raw = await _connect(in_memory, target)
        return SqliteDatabase(conn, raw, target, version=version, read_only=False)
    try:
        version, uri = await asyncio.to_thread(_prepare, target, read_only)
    except CoveError:
        raise
    except (OSError, sqlite3.Error) as exc:
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            raise StoreError(f"database error in {target}: {exc}") from exc
        raise StoreError(f"cannot open database {target}: {exc}") from exc
    if uri is not None:
        conn, raw = await _connect(lambda: connect_uri(uri), target)
    else:
        conn, raw = await _connect(lambda: connect_writer(target), target)
    return SqliteDatabase(conn, raw, target, version=version, read_only=read_only)


async def open_sqlite(path: str, *, read_only: bool) -> SqliteDatabase:
    """Open (creating and migrating if needed) the SQLite database at ``path``.

    A directory, a file that is not SQLite, or another application's database is refused and
    never touched; only a missing or empty file is initialised. Read-only, nothing is written:
    a missing file reads as an empty database, and an older schema is upgraded first only if
    the file is writable.

    Raises:
        NotADatabase, SchemaTooNew: refused. StoreError: it cannot be opened or migrated.
    """
    try:
        kind = classify(path)
    except PermissionError as exc:
        raise unreadable(path, exc) from exc
    empty = kind in (PathKind.MISSING, PathKind.EMPTY)
    if read_only and empty:
        # Nothing to read, and nothing may be created: an empty private database answers.
        blank = await _start(MEMORY, read_only=False)
        blank.location = path
        return blank
    if read_only:
        try:
            return await _start(path, read_only=True)
        except SchemaTooOld as too_old:
            # Reads need the current schema: upgrade the file if it can be written.
            try:
                upgraded = await _start(path, read_only=False)
            except StoreError as exc:
                raise SchemaTooOld(path, too_old.found) from exc
            await upgraded.aclose()
            return await _start(path, read_only=True)
    if kind is not PathKind.MEMORY:
        # A first run points at a data directory that may not exist yet; the directory is
        # made 0700 and the database (with its WAL and SHM) 0600, private to this user.
        try:
            create_private(path)
        except OSError as exc:
            raise unwritable(path) or StoreError(
                f"cannot open database {path}: {exc.strerror}"
            ) from exc
    try:
        db = await _start(path, read_only=False)
    except StoreError as exc:
        # SQLite's words for a read-only location do not say which file is at fault.
        denied = None if kind is PathKind.MEMORY else unwritable(path)
        if denied is None or isinstance(exc, (NotADatabase, SchemaTooNew)):
            raise
        raise denied from exc
    denied = None if kind is PathKind.MEMORY else unwritable(path)
    if denied is not None:
        # Opened, but its first write (crash recovery) would fail in SQLite's words.
        await db.aclose()
        raise denied
    db.created = empty
    return db
