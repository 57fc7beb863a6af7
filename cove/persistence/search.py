"""Full-text search over requests, answers and code, on either backend's index.

The dialect runs the query (FTS5's ``MATCH`` and ``snippet``, or a ``tsvector`` and its rank)
and marks each match; what a hit says is built here, the same for both.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from cove.persistence.chain import VISIBLE_TURNS, chain_cte
from cove.persistence.database import Call
from cove.persistence.records import LABEL_CHARS, SearchHit, conversation_label


async def search(
    call: Call,
    text: str,
    *,
    conversation_id: str | None = None,
    limit: int = 20,
    owner: str | None = None,
) -> list[SearchHit]:
    """Full-text search over requests, answers and code; words match literally.

    Args:
        call: the call.
        text: the words to find (all must occur); search syntax in it has no effect.
        conversation_id: search only what this conversation sees (fork-aware).
        limit: at most this many hits, best first.
        owner: only hits in this owner's conversations.
    """
    words = text.split()
    if not words:
        return []
    async with call.reading() as db:
        cte, params = "", list[Any]()
        scope = ""
        if conversation_id is not None:
            cte, params = await chain_cte(db, conversation_id)
            scope = VISIBLE_TURNS
        if owner is not None:
            scope += " JOIN conversation owned ON owned.id = t.conversation_id AND owned.owner = ?"
            params = [*params, owner]
        label = (
            f"(SELECT substr(f.request, 1, {LABEL_CHARS * 4}) FROM turn f"
            " WHERE f.conversation_id = t.conversation_id ORDER BY f.position LIMIT 1)"
        )
        query, tail = db.dialect.search_query(cte, scope, label)
        found = await db.rows(query, [*params, *db.dialect.search_params(words), limit, *tail])
    hits = []
    for row in found:
        plain, matches = _unmark(db.dialect.marked(row[4], words))
        hits.append(
            SearchHit(
                conversation_id=row[0],
                turn_id=row[1],
                turn_position=row[2],
                kind=cast(Literal["request", "answer", "code"], row[3]),
                snippet=_bracketed(plain, matches),
                text=plain,
                matches=matches,
                label=conversation_label(row[5], row[6]),
            )
        )
    return hits


# Match markers: control characters that requests, answers and code practically never hold.
_MATCH_START, _MATCH_END = "\x02", "\x03"


def _unmark(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A snippet marked with STX/ETX around each match: the plain text and the match offsets."""
    text: list[str] = []
    matches: list[tuple[int, int]] = []
    length, start = 0, 0
    for char in marked:
        if char == _MATCH_START:
            start = length
        elif char == _MATCH_END:
            matches.append((start, length))
        else:
            text.append(char)
            length += 1
    return "".join(text), tuple(matches)


def _bracketed(text: str, matches: tuple[tuple[int, int], ...]) -> str:
    out, last = [], 0
    for start, end in matches:
        out += [text[last:start], "[", text[start:end], "]"]
        last = end
    out.append(text[last:])
    return "".join(out)
