"""SQLite units run whole on the connection's thread: one hop per unit, not one per statement.

A unit is an async function of its ``Transactions``. Here those are plain ``sqlite3`` calls that
finish at once, so the unit's coroutine, driven on aiosqlite's thread (``drive``), runs to its end
without ever suspending: however many statements it has, it costs the event loop one hand-off
to that thread and one back. A unit that waits on anything else (a sleep, a future) cannot run
there and is refused with ``UnitSuspended`` rather than blocking the thread.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from cove.errors import StoreError
from cove.persistence.database import Unit
from cove.persistence.sql import Dialect, Row, reads_only

T = TypeVar("T")


class UnitSuspended(RuntimeError):
    """A SQLite unit waited on something other than its own statements."""


class ThreadSql:
    """One unit's statements on the ``sqlite3`` connection (``sql.Sql``), run where called."""

    dialect = Dialect()

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._ended = False

    def begin(self) -> None:
        """A new unit starts: it has not made its last write yet."""
        self._ended = False

    def _execute(self, query: str, params: Sequence[Any], last: bool) -> sqlite3.Cursor:
        if self._ended and not reads_only(query):
            raise StoreError("a unit wrote after its last write")
        self._ended = self._ended or last
        return self._conn.execute(query, params)

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row ``query`` returns."""
        return self._execute(query, params, False).fetchall()

    async def row(
        self, query: str, params: Sequence[Any] = (), *, last: bool = False
    ) -> Row | None:
        """The first row ``query`` returns, or None."""
        row: Row | None = self._execute(query, params, last).fetchone()
        return row

    async def value(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> Any:
        """The first column of the first row, or None."""
        row = self._execute(query, params, last).fetchone()
        return None if row is None else row[0]

    async def run(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> int:
        """Run a statement; how many rows it changed."""
        return self._execute(query, params, last).rowcount

    async def run_many(self, query: str, params: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter list."""
        if self._ended:
            raise StoreError("a unit wrote after its last write")
        self._conn.executemany(query, params)


class ThreadTransactions:
    """Reads and ``BEGIN IMMEDIATE`` write transactions on the connection's thread
    (``database.Transactions``); counts the transactions it committed."""

    dialect = ThreadSql.dialect

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._sql = ThreadSql(conn)
        self.committed = 0

    @contextlib.asynccontextmanager
    async def reading(self) -> Any:
        """The connection, for reads."""
        self._sql.begin()
        yield self._sql

    @contextlib.asynccontextmanager
    async def writing(self) -> Any:
        """One ``BEGIN IMMEDIATE`` transaction: IMMEDIATE takes the write lock up front, so a
        writer of another process is waited for (``busy_timeout``) at BEGIN, never half-way."""
        self._sql.begin()
        with self._transaction():
            yield self._sql
        self.committed += 1

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")


def drive(unit: Unit[T], transactions: ThreadTransactions) -> T:
    """Run ``unit`` to its end here (on the connection's thread) and return its result.

    Raises:
        UnitSuspended: the unit waited on something else (it is closed, its transaction
            rolled back).
    """
    coroutine = unit(transactions)
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise UnitSuspended(f"{unit!r} waited on something other than its SQLite statements")
