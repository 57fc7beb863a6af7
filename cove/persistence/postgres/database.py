"""The PostgreSQL backend: asyncpg's connection pool, one transaction per write unit.

Reads take a pooled connection; a write unit takes one for its transaction. A unit that wrote
anything ends with one message, one round trip: it takes a number from the ``cove_commit``
sequence, commits, and then notifies ``cove_commit`` in a transaction of its own, so other
nodes' watchers learn of it (``commits.py``). A lease
check locks the conversation's row until the unit commits (``Dialect.lock``); the value store
serialises its transactions with a transaction-scoped advisory lock, released at commit (never a
session lock, which would pin a connection and vanish with it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, TypeVar

import asyncpg

from cove.persistence.database import Unit
from cove.persistence.postgres.commits import PostgresCommits
from cove.persistence.postgres.dialect import PostgresDialect, numbered
from cove.persistence.sql import Row

T = TypeVar("T")

#: The value store's advisory lock key ("cove" + "vals" in ASCII).
VALUES_LOCK = 0x636F76657661
_READS = ("SELECT", "WITH")
#: Ends a write unit in one message: the unit takes its commit number, commits, and only then
#: notifies, in a transaction of its own. A notifying transaction holds a lock every notifier of
#: the cluster waits for until its commit is flushed, so notifying inside the unit would queue
#: every node's commits behind one another's WAL flush; the notification alone flushes nothing.
_COMMIT_AND_NOTIFY = "SELECT nextval('cove_commit'); COMMIT; SELECT pg_notify('cove_commit', '')"


def _param(value: Any) -> Any:
    # Flags are integer columns on both backends; asyncpg wants an int there, not a bool.
    if isinstance(value, bool):
        return int(value)
    # PostgreSQL's text cannot hold NUL, which a sandbox may well print: it is kept as U+FFFD
    # rather than refusing the whole unit (encoded values escape it, so they never have one).
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value


def _params(params: Sequence[Any]) -> list[Any]:
    return [_param(value) for value in params]


class PostgresSql:
    """The statements of one unit on a pooled connection (``sql.Sql``)."""

    dialect = PostgresDialect()

    def __init__(self, conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record]) -> None:
        self._conn = conn
        self.wrote = False
        self._values_locked = False

    def _writes(self, query: str) -> None:
        if not query.lstrip()[:6].upper().startswith(_READS):
            self.wrote = True

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row ``query`` returns."""
        self._writes(query)
        return list(await self._conn.fetch(numbered(query), *_params(params)))

    async def row(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row ``query`` returns, or None."""
        self._writes(query)
        return await self._conn.fetchrow(numbered(query), *_params(params))

    async def value(self, query: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or None."""
        self._writes(query)
        return await self._conn.fetchval(numbered(query), *_params(params))

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; how many rows it changed (from its command tag)."""
        self.wrote = True
        status = await self._conn.execute(numbered(query), *_params(params))
        last = str(status).rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def run_many(self, query: str, params: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter list."""
        batch = [_params(p) for p in params]
        if batch:
            self.wrote = True
            await self._conn.executemany(numbered(query), batch)

    async def take_values_lock(self) -> None:
        """Take the value store's transaction lock once in this transaction."""
        if not self._values_locked:
            await self._conn.execute("SELECT pg_advisory_xact_lock($1)", VALUES_LOCK)
            self._values_locked = True


class PostgresDatabase:
    """An open PostgreSQL database (``database.Database``)."""

    dialect = PostgresSql.dialect
    errors: tuple[type[BaseException], ...] = (
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        OSError,
    )

    def __init__(
        self, pool: asyncpg.Pool, dsn: str, location: str, *, version: int, read_only: bool
    ) -> None:
        self._pool = pool
        self.location = location
        self.schema_version = version
        self.read_only = read_only
        self.created = False
        self.shared = True
        self.commits = PostgresCommits(dsn)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[PostgresSql]:
        """A pooled connection, for reads."""
        async with self._pool.acquire() as conn:
            yield PostgresSql(conn)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[PostgresSql]:
        """One transaction on a pooled connection; it notifies ``cove_commit`` if it wrote
        (in the message that commits it)."""
        async with self._pool.acquire() as conn:
            await conn.execute("BEGIN")
            try:
                unit = PostgresSql(conn)
                yield unit
                await conn.execute(_COMMIT_AND_NOTIFY if unit.wrote else "COMMIT")
            except BaseException:
                if not conn.is_closed() and conn.is_in_transaction():
                    with contextlib.suppress(*self.errors):
                        await conn.execute("ROLLBACK")
                raise

    async def run(self, unit: Unit[T]) -> T:
        """Run ``unit`` here: each of its statements is a round trip to the server."""
        return await unit(self)

    async def aclose(self) -> None:
        """Close the commit listener and the pool."""
        await self.commits.aclose()
        await self._pool.close()
