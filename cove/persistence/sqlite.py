"""The SQLite backend, on aiosqlite: one connection, its own thread, units one at a time.

Every statement runs on aiosqlite's thread, never on the event loop's. The connection is this
process's one writer: a write unit holds it for its whole ``BEGIN IMMEDIATE`` transaction (an
``asyncio.Lock`` keeps other units' statements out of it, reads included), so each unit commits
whole or not at all; another process holding the write lock is waited for up to the busy timeout,
on that thread. The connection never checkpoints: every ``CHECKPOINT_EVERY`` write units a
second connection runs a PASSIVE checkpoint beside the writes, so no unit waits for an fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import aiosqlite

from cove.errors import CoveError, NotADatabase, SchemaTooNew, StoreError
from cove.persistence.access import unreadable, unwritable
from cove.persistence.connection import MEMORY, connect_writer, create_private
from cove.persistence.migrate import latest_version
from cove.persistence.opening import (
    PathKind,
    SchemaTooOld,
    classify,
    connect_uri,
    open_for_reading,
    open_for_writing,
)
from cove.persistence.sql import Dialect, Row
from cove.persistence.sqlite_commits import CommitPoller

#: Write units between two requests for a WAL checkpoint (run off the store's connection).
CHECKPOINT_EVERY = 200


class SqliteSql:
    """The statements of one unit on the aiosqlite connection (``sql.Sql``).

    In a write unit the ``BEGIN IMMEDIATE`` is sent with the unit's first statement when that
    one only reads (a check): both are queued at once, so the connection's thread runs them
    back to back and the unit saves one round trip. A first statement that writes waits for
    the BEGIN, so nothing is ever written outside the transaction.
    """

    dialect = Dialect()

    def __init__(self, conn: aiosqlite.Connection, *, begin: bool = False) -> None:
        self._conn = conn
        self._begin = begin

    async def begin(self) -> None:
        """Open the unit's transaction now if no statement has yet."""
        if self._begin:
            self._begin = False
            await self._conn.execute("BEGIN IMMEDIATE")

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row ``query`` returns."""
        if self._begin:
            self._begin = False
            begun = asyncio.ensure_future(self._conn.execute("BEGIN IMMEDIATE"))
            read = asyncio.ensure_future(self._conn.execute_fetchall(query, params))
            try:
                await begun
            except BaseException:
                await asyncio.wait((read,))  # ran outside any transaction: a read, dropped
                if not read.cancelled():
                    read.exception()
                raise
            return list(await read)
        return list(await self._conn.execute_fetchall(query, params))

    async def row(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row ``query`` returns, or None."""
        return next(iter(await self.rows(query, params)), None)

    async def value(self, query: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or None."""
        row = await self.row(query, params)
        return None if row is None else row[0]

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; how many rows it changed."""
        await self.begin()
        cursor = await self._conn.execute(query, params)
        return cursor.rowcount

    async def run_many(self, query: str, params: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter list."""
        await self.begin()
        await self._conn.executemany(query, params)


class SqliteDatabase:
    """An open SQLite database (``database.Database``)."""

    dialect = SqliteSql.dialect
    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(
        self, conn: aiosqlite.Connection, path: str, *, version: int, read_only: bool
    ) -> None:
        self._conn = conn
        self._sql = SqliteSql(conn)
        self._lock = asyncio.Lock()
        self._writes = 0
        self._checkpoint_conn: aiosqlite.Connection | None = None
        self._checkpoint: asyncio.Task[None] | None = None
        self._file = None if read_only or path == MEMORY else path
        self.location = path
        self.schema_version = version
        self.read_only = read_only
        self.created = False
        self.shared = path != MEMORY
        self.commits = CommitPoller(path)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[SqliteSql]:
        """The connection, for reads."""
        async with self._lock:
            yield self._sql

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[SqliteSql]:
        """One ``BEGIN IMMEDIATE`` transaction: IMMEDIATE takes the write lock up front, so a
        concurrent writer waits (``busy_timeout``) at BEGIN instead of failing half-way."""
        async with self._lock:
            unit = SqliteSql(self._conn, begin=True)
            try:
                yield unit
                await unit.begin()  # a unit that ran no statement still commits a transaction
            except BaseException:
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")
        self._writes += 1
        if self._writes % CHECKPOINT_EVERY == 0:
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
                self._checkpoint_conn = await aiosqlite.connect(path, isolation_level=None)
            await self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def aclose(self) -> None:
        """Close the connections (after the checkpoint running, if any)."""
        if self._checkpoint is not None:
            await self._checkpoint
        if self._checkpoint_conn is not None:
            await self._checkpoint_conn.close()
        await self.commits.aclose()
        await self._conn.close()


async def _connect(opener: Callable[[], sqlite3.Connection], target: str) -> aiosqlite.Connection:
    """Start an aiosqlite connection whose ``opener`` runs on its thread."""
    try:
        return await aiosqlite.Connection(opener, iter_chunk_size=64)
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

        conn = await _connect(in_memory, target)
        return SqliteDatabase(conn, target, version=version, read_only=False)
    try:
        version, uri = await asyncio.to_thread(_prepare, target, read_only)
    except CoveError:
        raise
    except (OSError, sqlite3.Error) as exc:
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            raise StoreError(f"database error in {target}: {exc}") from exc
        raise StoreError(f"cannot open database {target}: {exc}") from exc
    if uri is not None:
        conn = await _connect(lambda: connect_uri(uri), target)
    else:
        conn = await _connect(lambda: connect_writer(target), target)
    return SqliteDatabase(conn, target, version=version, read_only=read_only)


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
