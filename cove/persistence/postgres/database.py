"""The PostgreSQL backend: asyncpg's connection pool, one transaction per write unit.

Reads take a pooled connection; a write unit takes one for its transaction. ``BEGIN`` waits
for the unit's first statement: a unit whose first statement is its last write
(``Sql``'s ``last=True``) runs it as a transaction of its own, one round trip in all, and the
iteration's units are written so that they are one statement each (``Dialect.chains_writes``).
Every other unit is ``BEGIN``, its statements, ``COMMIT``. Once a unit that wrote has
committed, the ``Notifier`` tells other nodes' watchers (``commits.py``), off the unit's path.
A lease check locks the conversation's row until the unit commits (``Dialect.lock``); the value
store serialises its transactions with a transaction-scoped advisory lock, released at commit
(never a session lock, which would pin a connection and vanish with it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, TypeVar

import asyncpg

from cove.errors import StoreError
from cove.persistence.database import Unit
from cove.persistence.postgres.commits import Notifier, PostgresCommits
from cove.persistence.postgres.dialect import PostgresDialect, numbered
from cove.persistence.sql import Row, reads_only

T = TypeVar("T")

#: The value store's advisory lock key ("cove" + "vals" in ASCII).
VALUES_LOCK = 0x636F76657661


def _param(value: Any) -> Any:
    # Flags are integer columns on both backends; asyncpg wants an int there, not a bool.
    if isinstance(value, bool):
        return int(value)
    # PostgreSQL's text cannot hold NUL, which a sandbox may well print: it is kept as U+FFFD
    # rather than refusing the whole unit (encoded values escape it, so they never have one).
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    # The columns of several rows, as arrays (``unnest``).
    if isinstance(value, list):
        return [_param(item) for item in value]
    return value


def _params(params: Sequence[Any]) -> list[Any]:
    return [_param(value) for value in params]


class PostgresSql:
    """The statements of one unit on a pooled connection (``sql.Sql``).

    In a write unit (``in_unit``) the transaction begins with the first statement, unless that
    statement is the unit's last write: then it is a transaction of its own.
    """

    dialect = PostgresDialect()

    def __init__(
        self, conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], *, in_unit: bool = False
    ) -> None:
        self._conn = conn
        self._in_unit = in_unit
        self.begun = False
        self.ended = False
        self.wrote = False
        self._values_locked = False

    async def _before(self, query: str, last: bool) -> str:
        """Check and prepare a statement of the unit; the statement as asyncpg takes it."""
        writes = last or not reads_only(query)
        if writes and self.ended:
            raise StoreError("a unit wrote after its last write")
        if self._in_unit and not self.begun and not self.ended and not last:
            await self._conn.execute("BEGIN")
            self.begun = True
        self.wrote = self.wrote or writes
        self.ended = self.ended or last
        return numbered(query)

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row ``query`` returns."""
        return list(await self._conn.fetch(await self._before(query, False), *_params(params)))

    async def row(
        self, query: str, params: Sequence[Any] = (), *, last: bool = False
    ) -> Row | None:
        """The first row ``query`` returns, or None."""
        return await self._conn.fetchrow(await self._before(query, last), *_params(params))

    async def value(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> Any:
        """The first column of the first row, or None."""
        return await self._conn.fetchval(await self._before(query, last), *_params(params))

    async def run(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> int:
        """Run a statement; how many rows it changed (from its command tag)."""
        sent = await self._before(query, last)
        self.wrote = True
        status = await self._conn.execute(sent, *_params(params))
        tail = str(status).rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def run_many(self, query: str, params: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter list."""
        batch = [_params(p) for p in params]
        if batch:
            sent = await self._before(query, False)
            self.wrote = True
            await self._conn.executemany(sent, batch)

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
        self._notifier = Notifier(dsn, self.errors)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[PostgresSql]:
        """A pooled connection, for reads."""
        async with self._pool.acquire() as conn:
            yield PostgresSql(conn)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[PostgresSql]:
        """One transaction on a pooled connection (begun by its first statement, or that
        statement alone when it is the unit's last write); other nodes are told once it has
        committed, if it wrote."""
        async with self._pool.acquire() as conn:
            unit = PostgresSql(conn, in_unit=True)
            try:
                yield unit
                if unit.begun:
                    await conn.execute("COMMIT")
            except BaseException:
                if not conn.is_closed() and conn.is_in_transaction():
                    with contextlib.suppress(*self.errors):
                        await conn.execute("ROLLBACK")
                raise
        if unit.wrote:
            self._notifier.poke()

    async def run(self, unit: Unit[T]) -> T:
        """Run ``unit`` here: each of its statements is a round trip to the server."""
        return await unit(self)

    async def told(self) -> None:
        """Wait until the commits this process made so far have been told to other nodes."""
        await self._notifier.told()

    async def aclose(self) -> None:
        """Tell of the last commits, then close the commit listener and the pool."""
        await self._notifier.aclose()
        await self.commits.aclose()
        await self._pool.close()
