"""Where PostgreSQL's SQL differs from SQLite's, and its statements' placeholders.

The store writes ``?`` and ``?N`` placeholders; asyncpg takes ``$N``. ``numbered`` rewrites a
statement once and keeps the result (the store's statements are few and fixed in form).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

from cove.persistence.sql import Dialect, Sql

_PLACEHOLDER = re.compile(r"\?(\d*)")
_WORD = re.compile(r"[^\W_]+")
#: Words of context a search snippet shows around its first match (as SQLite's ``snippet``).
SNIPPET_WORDS = 16
_MATCH_START, _MATCH_END = "\x02", "\x03"


@lru_cache(maxsize=4096)
def numbered(query: str) -> str:
    """``query`` with ``?`` placeholders numbered ``$1, $2, …`` in order and ``?N`` as ``$N``."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match[1]:
            return f"${match[1]}"
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, query)


class _ValuesLock(Protocol):
    async def take_values_lock(self) -> None: ...


class PostgresDialect(Dialect):
    """PostgreSQL's side of ``sql.Dialect``."""

    name = "postgres"
    chains_writes = True

    def lock(self, alias: str | None = None) -> str:
        """``FOR UPDATE``: the row stays locked until the unit commits, so a lease check and
        the write it allows are one step even while other nodes write."""
        return " FOR UPDATE" if alias is None else f" FOR UPDATE OF {alias}"

    async def lock_values(self, db: Sql) -> None:
        """The value store's transaction lock (``values.py``), taken once per transaction."""
        locker: Any = db
        await locker.take_values_lock()

    def greatest(self, *terms: str) -> str:
        """``greatest(...)``."""
        return f"greatest({', '.join(terms)})"

    def ids(self, placeholder: str) -> str:
        """The integers of a JSON list parameter."""
        return f"SELECT e::bigint FROM jsonb_array_elements_text(CAST({placeholder} AS jsonb)) e"

    def children(self, alias: str) -> str:
        """A chunk's children as rows of ``value``."""
        return (
            "LATERAL (SELECT e::bigint AS value FROM jsonb_array_elements_text("
            f"CAST({alias}.children AS jsonb)) e)"
        )

    def chain_row(self) -> str:
        """A typed ``(text, bigint, bigint)`` row (a bare parameter in VALUES has no type)."""
        return "(CAST(? AS text), CAST(? AS bigint), CAST(? AS bigint))"

    async def index_texts(self, db: Sql, texts: Sequence[tuple[int, str, str]]) -> None:
        """One ``search_doc`` row per text, with its words as a ``tsvector``."""
        if texts:
            await db.run_many(
                "INSERT INTO search_doc (turn_id, kind, text, words)"
                " VALUES (?, ?, ?, to_tsvector('simple', ?))",
                [(turn_id, kind, text, text) for turn_id, kind, text in texts],
            )

    async def index_selected(self, db: Sql, select: str, params: Sequence[Any]) -> None:
        """Add the searchable ``(turn id, kind, text)`` rows that ``select`` returns, in one
        ``INSERT … SELECT`` (nothing read back)."""
        await db.run(self.index_insert(select), params)

    def index_insert(self, select: str) -> str:
        """The ``INSERT`` adding the searchable ``(turn id, kind, text)`` rows of ``select``
        (a statement of its own, or a ``WITH`` query chained to another)."""
        return (
            "INSERT INTO search_doc (turn_id, kind, text, words)"
            " SELECT s.turn_id, s.kind, s.text, to_tsvector('simple', s.text)"
            f" FROM ({select}) AS s (turn_id, kind, text)"
        )

    def search_query(self, cte: str, scope: str, label: str) -> tuple[str, list[Any]]:
        """The search over the GIN-indexed ``tsvector``s, best ``ts_rank`` first; the fifth
        column is the whole text (``marked`` cuts the snippet)."""
        query = f"""
            {cte}
            SELECT t.conversation_id, d.turn_id, t.position, d.kind, d.text,
                   named.title, {label}
            FROM search_doc d
            JOIN turn t ON t.id = d.turn_id {scope}
            JOIN conversation named ON named.id = t.conversation_id
            WHERE d.words @@ plainto_tsquery('simple', ?)
            ORDER BY ts_rank(d.words, plainto_tsquery('simple', ?)) DESC, d.id LIMIT ?
        """
        return query, []

    def search_params(self, words: Sequence[str]) -> list[Any]:
        """The words, once for the match and once for the rank (``plainto_tsquery`` reads
        them as plain words: no syntax)."""
        text = " ".join(words)
        return [text, text]

    def marked(self, text: str, words: Sequence[str]) -> str:
        """A snippet of ``text`` around its first match, each match between STX and ETX, cut
        with ``…`` like SQLite's ``snippet``."""
        wanted = {w.lower() for word in words for w in _WORD.findall(word)}
        tokens = list(_WORD.finditer(text))
        hits = [i for i, token in enumerate(tokens) if token[0].lower() in wanted]
        if not tokens:
            return text
        first = hits[0] if hits else 0
        start = max(0, min(first - 2, len(tokens) - SNIPPET_WORDS))
        end = min(len(tokens), start + SNIPPET_WORDS)
        begin_at = 0 if start == 0 else tokens[start].start()
        stop_at = len(text) if end == len(tokens) else tokens[end - 1].end()
        out = ["…"] if begin_at > 0 else []
        last = begin_at
        for i in hits:
            if start <= i < end:
                token = tokens[i]
                out += [text[last : token.start()], _MATCH_START, token[0], _MATCH_END]
                last = token.end()
        out.append(text[last:stop_at])
        if stop_at < len(text):
            out.append("…")
        return "".join(out)
