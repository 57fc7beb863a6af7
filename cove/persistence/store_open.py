"""Opening a ``Store``: what ``Store.open`` returns (awaitable and async context manager)."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from pathlib import Path
from types import TracebackType
from typing import Any

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
from cove.persistence.store import Clock, Store


class StoreOpener:
    """What ``Store.open`` returns: ``await`` it, or use it with ``async with``."""

    def __init__(self, path: str, clock: Clock, read_only: bool, history_budget: int) -> None:
        self._path = path
        self._clock = clock
        self._read_only = read_only
        self._history_budget = history_budget
        self._store: Store | None = None

    async def _open(self) -> Store:
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
                await store.aclose()
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
        store._path = path
        store._created = kind in (PathKind.MISSING, PathKind.EMPTY) and target != MEMORY
        return store

    async def _start(self, target: str, *, read_only: bool) -> Store:
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
        store = Store(thread, target, self._clock)
        store.history_budget = self._history_budget
        store._schema_version = version
        store._read_only = read_only
        store._file = None if read_only or target == MEMORY else target
        return store

    def __await__(self) -> Generator[Any, None, Store]:
        return self._open().__await__()

    async def __aenter__(self) -> Store:
        self._store = await self._open()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.aclose()
