"""Opening the database a ``Store`` runs on: refusals, creation, upgrade and read-only opens."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cove.errors import CoveError, NotADatabase, SchemaTooNew, StoreError
from cove.persistence.access import unreadable, unwritable
from cove.persistence.connection import MEMORY, create_private
from cove.persistence.dbthread import DbThread
from cove.persistence.migrate import latest_version
from cove.persistence.opening import (
    PathKind,
    SchemaTooOld,
    classify,
    open_for_reading,
    open_for_writing,
)


@dataclass
class Opened:
    """An open database: its thread and what ``Store`` says about it."""

    thread: DbThread
    path: str
    schema_version: int
    read_only: bool
    file: str | None  # the file written, when it is one (not memory, not read-only)
    created: bool = False


class DatabaseOpening:
    """Opens the database at ``path`` as ``Store.open`` asks."""

    def __init__(self, path: str, clock: Callable[[], float], read_only: bool) -> None:
        self._path = path
        self._clock = clock
        self._read_only = read_only

    async def open(self) -> Opened:
        """Open the database; see ``Store.open`` for what is refused."""
        path = self._path
        try:
            kind = classify(path)
        except PermissionError as exc:
            raise unreadable(path, exc) from exc
        target = path
        if self._read_only and kind in (PathKind.MISSING, PathKind.EMPTY):
            # Nothing to read, and nothing may be created: an empty private database answers.
            target = MEMORY
        read_only = self._read_only and target != MEMORY
        if read_only:
            try:
                return await self._start(path, read_only=True)
            except SchemaTooOld as too_old:
                # Reads need the current schema: upgrade the file if it can be written.
                try:
                    store = await self._start(path, read_only=False)
                except StoreError as exc:
                    raise SchemaTooOld(path, too_old.found) from exc
                await store.thread.close()
                return await self._start(path, read_only=True)
        if target != MEMORY:
            # A first run points at a data directory that may not exist yet; the directory is
            # made 0700 and the database (with its WAL and SHM) 0600, private to this user.
            try:
                create_private(path)
            except OSError as exc:
                raise unwritable(path) or StoreError(
                    f"cannot open database {path}: {exc.strerror}"
                ) from exc
        try:
            store = await self._start(target, read_only=False)
        except StoreError as exc:
            # SQLite's words for a read-only location do not say which file is at fault.
            denied = None if target == MEMORY else unwritable(path)
            if denied is None or isinstance(exc, (NotADatabase, SchemaTooNew)):
                raise
            raise denied from exc
        store.path = path
        store.created = kind in (PathKind.MISSING, PathKind.EMPTY) and target != MEMORY
        return store

    async def _start(self, target: str, *, read_only: bool) -> Opened:
        version = latest_version()
        now = self._clock()

        def opener() -> sqlite3.Connection:
            nonlocal version
            if read_only:
                return open_for_reading(target)
            conn, version = open_for_writing(target, now)
            return conn

        try:
            thread = await DbThread.start(opener, name=f"cove-db {Path(target).name}")
        except CoveError:
            raise
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            ):
                raise StoreError(f"database error in {target}: {exc}") from exc
            raise StoreError(f"cannot open database {target}: {exc}") from exc
        file = None if read_only or target == MEMORY else target
        return Opened(thread, target, version, read_only, file)
