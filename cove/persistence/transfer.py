"""Moving every conversation with its whole history to another database (``cove migrate``).

The source is opened for reading only; the target (either backend, created and migrated if
needed) must hold no conversation yet. Rows are copied table by table in foreign-key order, in
pages of ``PAGE`` rows, each page one write transaction on the target, keeping every id, so the
copy is the same history: turns, iterations, blocks, variable versions, the value chunks and
their counts, sub-queries, steering, notes, blobs and figures. The search index is built anew
on the target from the texts it indexes (requests, answers, the code of closed iterations), in
the target's own form. Identity sequences then continue after the copied ids. Every table's
row count is compared at the end.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cove.errors import CoveError, StoreError
from cove.persistence.database import Database, Transactions, Unit
from cove.persistence.locations import open_database, shown
from cove.persistence.sql import Sql

PAGE = 500
T = TypeVar("T")
#: The tables copied, in foreign-key order, each with the unique column its pages follow.
TABLES: tuple[tuple[str, str], ...] = (
    ("blob", "hash"),
    ("conversation", ""),  # all at once, parents before forks
    ("turn", "id"),
    ("iteration", "id"),
    ("block", "id"),
    ("block_figure", ""),
    ("value_chunk", "id"),
    ("value_ref", "chunk_id"),
    ("var_version", "id"),
    ("subquery", "id"),
    ("steering", "id"),
    ("cancel_request", "turn_id"),
    ("turn_note", "id"),
    ("conversation_profile", "id"),
    ("conversation_extensions", "conversation_id"),
    ("approval", "id"),
    ("inbox", "key"),  # deliveries not handled yet: the moved database runs them
)
#: The tables whose integer ids a sequence hands out on PostgreSQL.
IDENTITY_TABLES = (
    "turn",
    "iteration",
    "block",
    "value_chunk",
    "var_version",
    "subquery",
    "steering",
    "turn_note",
    "search_doc",
    "conversation_profile",
    "approval",
)


@dataclass(frozen=True)
class TransferReport:
    """What a move copied: the rows of each table, and where from and to."""

    source: str
    target: str
    rows: dict[str, int]
    search_texts: int

    @property
    def conversations(self) -> int:
        """How many conversations were moved."""
        return self.rows.get("conversation", 0)


def _reads(body: Callable[[Sql], Awaitable[T]]) -> Unit[T]:
    """A unit that runs ``body`` on a read connection."""

    async def unit(on: Transactions) -> T:
        async with on.reading() as db:
            return await body(db)

    return unit


def _writes(body: Callable[[Sql], Awaitable[T]]) -> Unit[T]:
    """A unit that runs ``body`` in one write transaction."""

    async def unit(on: Transactions) -> T:
        async with on.writing() as db:
            return await body(db)

    return unit


async def _page(db: Sql, *, table: str, key: str, after: Any) -> list[Any]:
    if after is None:
        return await db.rows(f"SELECT * FROM {table} ORDER BY {key} LIMIT ?", (PAGE,))
    return await db.rows(
        f"SELECT * FROM {table} WHERE {key} > ? ORDER BY {key} LIMIT ?", (after, PAGE)
    )


async def _insert(target: Database, table: str, rows: Sequence[Any]) -> None:
    if not rows:
        return
    columns = list(rows[0].keys())
    marks = ", ".join("?" for _ in columns)

    async def insert(on: Transactions) -> None:
        async with on.writing() as db:
            await db.run_many(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                [tuple(row[c] for c in columns) for row in rows],
            )

    await target.run(insert)


def _parents_first(rows: list[Any]) -> list[Any]:
    """Conversations ordered so that a fork comes after the conversation it forks."""
    placed: set[str] = set()
    ordered: list[Any] = []
    waiting = list(rows)
    while waiting:
        ready = [r for r in waiting if r["parent_id"] is None or r["parent_id"] in placed]
        if not ready:
            raise StoreError("the source's forks point at conversations it does not hold")
        ordered += ready
        placed.update(str(r["id"]) for r in ready)
        waiting = [r for r in waiting if str(r["id"]) not in placed]
    return ordered


async def _copy_table(source: Database, target: Database, table: str, key: str) -> int:
    if not key:
        rows = await source.run(_reads(lambda db: db.rows(f"SELECT * FROM {table}")))
        if table == "conversation":
            rows = _parents_first(rows)
        for start in range(0, len(rows), PAGE):
            await _insert(target, table, rows[start : start + PAGE])
        return len(rows)
    copied, after = 0, None
    while True:
        rows = await source.run(_reads(functools.partial(_page, table=table, key=key, after=after)))
        if not rows:
            return copied
        await _insert(target, table, rows)
        copied += len(rows)
        after = rows[-1][key]


async def _index(target: Database) -> int:
    """Build the target's search index from its rows: what the store indexes as it writes."""
    queries = (
        "SELECT id, 'request', request FROM turn",
        "SELECT id, 'answer', answer FROM turn WHERE answer IS NOT NULL AND answer <> ''",
        "SELECT i.turn_id, 'code', b.code FROM block b JOIN iteration i ON i.id = b.iteration_id"
        " WHERE i.status <> 'running' ORDER BY b.iteration_id, b.position",
    )

    async def found(db: Sql) -> list[tuple[int, str, str]]:
        return [(int(r[0]), str(r[1]), str(r[2])) for q in queries for r in await db.rows(q)]

    texts = await target.run(_reads(found))
    for start in range(0, len(texts), PAGE):
        page = texts[start : start + PAGE]
        await target.run(_writes(functools.partial(_index_page, texts=page)))
    return len(texts)


async def _index_page(db: Sql, *, texts: Sequence[tuple[int, str, str]]) -> None:
    await db.dialect.index_texts(db, texts)


async def _counts(db: Database) -> dict[str, int]:
    async def counts(sql: Sql) -> dict[str, int]:
        return {table: int(await sql.value(f"SELECT count(*) FROM {table}")) for table, _ in TABLES}

    return await db.run(_reads(counts))


async def _continue_ids(target: Database) -> None:
    """On PostgreSQL, make each identity sequence continue after the copied ids."""
    if target.dialect.name != "postgres":
        return

    async def continue_ids(db: Sql) -> None:
        for table in IDENTITY_TABLES:
            await db.value(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                f" coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
            )

    await target.run(_writes(continue_ids))


async def transfer(source_location: str, target_location: str) -> TransferReport:
    """Copy every conversation of ``source_location`` to ``target_location``.

    Raises:
        CoveError: the target already holds conversations, or is the source.
        StoreError: either database cannot be opened, or the copy does not match the source.
    """
    if source_location == target_location:
        raise CoveError("the target is the source database")
    source = await open_database(source_location, read_only=True)
    try:
        target = await open_database(target_location, read_only=False)
        try:
            return await _transfer(source, target)
        finally:
            await target.aclose()
    finally:
        await source.aclose()


async def _transfer(source: Database, target: Database) -> TransferReport:
    if source.schema_version != target.schema_version:
        raise StoreError(
            f"{source.location} has schema version {source.schema_version} and "
            f"{target.location} {target.schema_version}: open both with this cove first"
        )
    held = int(await target.run(_reads(lambda db: db.value("SELECT count(*) FROM conversation"))))
    if held:
        raise CoveError(
            f"{target.location} already holds {held} conversations: move into an empty database"
        )
    rows = {table: await _copy_table(source, target, table, key) for table, key in TABLES}
    texts = await _index(target)
    await _continue_ids(target)
    copied = await _counts(target)
    if copied != await _counts(source):
        raise StoreError(f"the copy in {target.location} does not match {source.location}")
    return TransferReport(shown(source.location), shown(target.location), rows, texts)
