"""Counting what the store sends its database: units, statements and round trips.

``CountingDatabase`` wraps an open ``Database`` (``Store(CountingDatabase(db), ...)``) and counts
the units run (on SQLite, one hop to the connection's thread each), the statements they send
through ``Sql`` (a ``run_many`` counts once) and the BEGIN and COMMIT of each write transaction.
``WireCounter`` sits between asyncpg and a PostgreSQL server's Unix socket and counts what goes
over the wire: the exchanges the client waits for (one ``ReadyForQuery`` from the server ends
each) and the statements it asks to run (``Execute`` messages and the statements of simple
``Query`` messages). Used by ``bench/store_bench.py`` and the round-trip tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

from cove.persistence.database import Database, Transactions, Unit
from cove.persistence.sql import Dialect, Row, Sql

T = TypeVar("T")


@dataclass
class Counts:
    """What was sent since the counts were last taken."""

    units: int = 0
    statements: int = 0
    transactions: int = 0

    def take(self) -> Counts:
        """These counts, and start again from zero."""
        taken = Counts(self.units, self.statements, self.transactions)
        self.units = self.statements = self.transactions = 0
        return taken


class _CountingSql:
    def __init__(self, inner: Sql, counts: Counts) -> None:
        self._inner = inner
        self._counts = counts
        self.dialect = inner.dialect

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # the backend's extras (the values lock)

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        self._counts.statements += 1
        return await self._inner.rows(query, params)

    async def row(
        self, query: str, params: Sequence[Any] = (), *, last: bool = False
    ) -> Row | None:
        self._counts.statements += 1
        return await self._inner.row(query, params, last=last)

    async def value(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> Any:
        self._counts.statements += 1
        return await self._inner.value(query, params, last=last)

    async def run(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> int:
        self._counts.statements += 1
        return await self._inner.run(query, params, last=last)

    async def run_many(self, query: str, params: Iterable[Sequence[Any]]) -> None:
        self._counts.statements += 1
        await self._inner.run_many(query, params)


class _CountingTransactions:
    def __init__(self, inner: Transactions, counts: Counts) -> None:
        self._inner = inner
        self._counts = counts

    @property
    def dialect(self) -> Dialect:
        return self._inner.dialect

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[Sql]:
        async with self._inner.reading() as db:
            yield _CountingSql(db, self._counts)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[Sql]:
        self._counts.transactions += 1
        async with self._inner.writing() as db:
            yield _CountingSql(db, self._counts)


class CountingDatabase:
    """A ``Database`` that counts the units it runs and the statements they send, and adds up
    the time spent inside them (``inside_s``; on SQLite, on the connection's thread: a unit
    runs there whole, so the time is its statements' and not the hand-off's)."""

    def __init__(self, inner: Database) -> None:
        self._inner = inner
        self.counts = Counts()
        self.inside_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def run(self, unit: Unit[T]) -> T:
        self.counts.units += 1
        counts = self.counts

        async def counted(db: Transactions) -> T:
            started = time.perf_counter()
            try:
                return await unit(_CountingTransactions(db, counts))
            finally:
                self.inside_s += time.perf_counter() - started

        return await self._inner.run(counted)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class WireCounts:
    """What went to a PostgreSQL server: round trips (``ReadyForQuery`` messages the client
    waited for), statements (``Execute`` messages and simple-query statements) and ``Parse``
    messages (statements prepared)."""

    round_trips: int = 0
    statements: int = 0
    prepares: int = 0

    def take(self) -> WireCounts:
        """These counts, and start again from zero."""
        taken = WireCounts(self.round_trips, self.statements, self.prepares)
        self.round_trips = self.statements = self.prepares = 0
        return taken


class _Messages:
    """Splits one direction of the protocol into messages (type byte, length, body)."""

    def __init__(self, untyped_first: bool) -> None:
        self._buffer = b""
        self._untyped = untyped_first  # the startup message (and an SSL request) have no type

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buffer += data
        found = []
        while True:
            if self._untyped:
                if len(self._buffer) < 4:
                    return found
                (length,) = struct.unpack("!i", self._buffer[:4])
                if len(self._buffer) < length:
                    return found
                body, self._buffer = self._buffer[4:length], self._buffer[length:]
                code = struct.unpack("!i", body[:4])[0] if len(body) >= 4 else 0
                self._untyped = code == 80877103  # an SSL request: the startup comes next
                found.append((b"", body))
                continue
            if len(self._buffer) < 5:
                return found
            kind = self._buffer[:1]
            (length,) = struct.unpack("!i", self._buffer[1:5])
            if len(self._buffer) < 1 + length:
                return found
            body, self._buffer = self._buffer[5 : 1 + length], self._buffer[1 + length :]
            found.append((kind, body))


class WireCounter:
    """A Unix-socket relay in front of a PostgreSQL server that counts what crosses it.

    ``async with WireCounter(url) as counter:`` then connect to ``counter.url``.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._url = parts
        query = parse_qs(parts.query)
        self._server_dir = query["host"][0]
        self._port = int(query.get("port", ["5432"])[0])
        self._folder = tempfile.TemporaryDirectory(prefix="cove-wire-")
        self._relay: asyncio.AbstractServer | None = None
        self.counts = WireCounts()

    @property
    def url(self) -> str:
        """The server's URL with its socket folder replaced by the relay's."""
        return urlunsplit(self._url._replace(query=f"host={quote(self._folder.name)}"))

    async def __aenter__(self) -> WireCounter:
        path = Path(self._folder.name) / ".s.PGSQL.5432"
        self._relay = await asyncio.start_unix_server(self._serve, path=str(path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._relay is not None:
            self._relay.close()
            await self._relay.wait_closed()
        self._folder.cleanup()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        socket = str(Path(self._server_dir) / f".s.PGSQL.{self._port}")
        server_r, server_w = await asyncio.open_unix_connection(socket)
        to_server = _Messages(untyped_first=True)
        to_client = _Messages(untyped_first=False)

        def sent(data: bytes) -> None:
            for kind, body in to_server.feed(data):
                if kind == b"E":
                    self.counts.statements += 1
                elif kind == b"P":
                    self.counts.prepares += 1
                elif kind == b"Q":
                    text = body.rstrip(b"\0").decode()
                    self.counts.statements += sum(1 for s in text.split(";") if s.strip())

        def received(data: bytes) -> None:
            for kind, _ in to_client.feed(data):
                if kind == b"Z":
                    self.counts.round_trips += 1

        await asyncio.gather(_pipe(client_r, server_w, sent), _pipe(server_r, client_w, received))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Any) -> None:
    with contextlib.suppress(ConnectionError):
        try:
            while data := await reader.read(65536):
                seen(data)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()
