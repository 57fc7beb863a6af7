"""What the store's units run on: one connection's statements, in the backend's dialect.

Every read and write of the store is an async function of a ``Sql`` (a connection for reads,
or one open transaction for a write unit). Statements are written once, with ``?`` (or ``?N``)
placeholders, in the SQL that SQLite and PostgreSQL share; where the two differ the unit asks
its ``Dialect`` (a bigger of two values, a list of ids as one parameter, the search index).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

#: A result row: by position (``row[0]``) or by column name (``row["id"]``).
Row = Any


def reads_only(query: str) -> bool:
    """Whether ``query`` only reads: a ``SELECT`` (``… FOR UPDATE`` included) or a ``WITH``
    query. A ``WITH`` query that writes is always its unit's last statement (``last=True``),
    which counts as a write."""
    return query.lstrip()[:6].upper().startswith(("SELECT", "WITH"))


class Dialect:
    """Where the SQL of SQLite and PostgreSQL differ, the SQLite side (the default)."""

    name = "sqlite"
    #: Whether one statement can make several writes (data-modifying ``WITH`` queries), so a
    #: unit's writes can be chained into the one statement that decides them all.
    chains_writes = False

    def lock(self, alias: str | None = None) -> str:
        """What ends a SELECT to lock the rows it reads (of table ``alias`` in a join) until
        the transaction ends, so a check and the write it allows are one step. SQLite has one
        writer at a time: nothing to add."""
        return ""

    async def lock_values(self, db: Sql) -> None:
        """Serialise the transactions that add, count or delete value chunks (``values.py``).

        SQLite's transactions already are."""

    def greatest(self, *terms: str) -> str:
        """The larger of the terms, as SQL."""
        return f"max({', '.join(terms)})"

    def ids(self, placeholder: str) -> str:
        """A subquery of the integers in ``placeholder``, bound to ``id_list(ids)``."""
        return f"SELECT value FROM json_each({placeholder})"

    def id_list(self, ids: Iterable[int]) -> str:
        """The parameter ``ids(placeholder)`` reads."""
        return json.dumps(list(ids))

    def children(self, alias: str) -> str:
        """A table of the ids in ``{alias}.children`` (a chunk's JSON list), column ``value``."""
        return f"json_each({alias}.children)"

    def chain_row(self) -> str:
        """One ``(conversation id, last turn, depth)`` row of a fork-chain ``VALUES`` list."""
        return "(?, ?, ?)"

    async def index_texts(self, db: Sql, texts: Sequence[tuple[int, str, str]]) -> None:
        """Add searchable ``(turn id, kind, text)``s: ``search_doc`` rows whose ids are their
        FTS5 rowids, numbered here (the unit holds SQLite's one write lock) so that any number
        of texts costs three statements."""
        if not texts:
            return
        last = int(await db.value("SELECT coalesce(max(id), 0) FROM search_doc"))
        await db.run_many(
            "INSERT INTO search_doc (id, turn_id, kind) VALUES (?, ?, ?)",
            [(last + n, turn_id, kind) for n, (turn_id, kind, _) in enumerate(texts, 1)],
        )
        await db.run_many(
            "INSERT INTO search_fts (rowid, text) VALUES (?, ?)",
            [(last + n, text) for n, (_, _, text) in enumerate(texts, 1)],
        )

    def index_insert(self, select: str) -> str:
        """The one ``INSERT`` adding the searchable rows of ``select``, for a backend that
        chains writes (``chains_writes``); SQLite numbers its FTS5 rows itself and has none."""
        raise NotImplementedError("SQLite indexes texts in several statements")

    async def index_selected(self, db: Sql, select: str, params: Sequence[Any]) -> None:
        """Add the searchable ``(turn id, kind, text)`` rows that ``select`` returns (read
        first: their FTS5 rowids are numbered here)."""
        rows = await db.rows(select, params)
        await self.index_texts(db, [(row[0], row[1], row[2]) for row in rows])

    def search_query(self, cte: str, scope: str, label: str) -> tuple[str, list[Any]]:
        """The search: rows of (conversation, turn id, turn position, kind, snippet with each
        match between STX and ETX, title, first request), best first; its parameters are the
        scope's, then ``search_params``, then the limit, then the returned list."""
        query = f"""
            {cte}
            SELECT t.conversation_id, d.turn_id, t.position, d.kind,
                   snippet(search_fts, 0, char(2), char(3), '…', 16) AS snippet,
                   named.title, {label}
            FROM search_fts
            JOIN search_doc d ON d.id = search_fts.rowid
            JOIN turn t ON t.id = d.turn_id {scope}
            JOIN conversation named ON named.id = t.conversation_id
            WHERE search_fts MATCH ?
            ORDER BY rank LIMIT ?
        """
        return query, []

    def marked(self, text: str, words: Sequence[str]) -> str:
        """The snippet of a search row (SQLite's ``snippet`` made it already)."""
        return text

    def search_params(self, words: Sequence[str]) -> list[Any]:
        """The parameters of the words to find: every word quoted, so it matches literally and
        is never read as FTS5 syntax."""
        return [" ".join('"' + word.replace('"', '""') + '"' for word in words)]


class Sql(Protocol):
    """One connection (for reads) or one transaction (for a write unit).

    A write unit marks its last write ``last=True``. On PostgreSQL a unit whose first statement
    is its last one runs it as a transaction of its own, with no ``BEGIN`` or ``COMMIT`` to wait
    for (a unit's writes are chained into one statement where they can be: ``chains_writes``).
    After its last write a unit may still read (to say why a guarded write matched no row), but
    writing again raises ``StoreError``. SQLite commits when the unit ends either way.
    """

    @property
    def dialect(self) -> Dialect:
        """Where the backend's SQL differs."""
        ...

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row ``query`` returns."""
        ...

    async def row(
        self, query: str, params: Sequence[Any] = (), *, last: bool = False
    ) -> Row | None:
        """The first row ``query`` returns, or None."""
        ...

    async def value(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> Any:
        """The first column of the first row ``query`` returns (None when there is no row)."""
        ...

    async def run(self, query: str, params: Sequence[Any] = (), *, last: bool = False) -> int:
        """Run a statement; how many rows it changed."""
        ...

    async def run_many(self, query: str, params: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter list."""
        ...
