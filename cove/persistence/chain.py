"""The fork chain: which conversations' turns a conversation sees, and up to which position.

A fork copies nothing. It sees its parent's turns up to ``fork_turn`` (and, recursively, what
the parent saw up to that point), then its own turns, which are numbered from ``fork_turn + 1``.
Reads express this as a small ``chain(cid, lim, depth)`` CTE joined against ``turn``.
"""

from __future__ import annotations

from typing import Any

from cove.errors import NotFound
from cove.persistence.sql import Sql

# Stands for "no limit" in a chain segment; larger than any turn position.
UNLIMITED = 1 << 62
#: Joins ``turn t`` to a ``chain_cte``: the turns the conversation sees.
VISIBLE_TURNS = "JOIN chain ON t.conversation_id = chain.cid AND t.position <= chain.lim"


async def chain(db: Sql, conversation_id: str) -> list[tuple[str, int]]:
    """Return ``[(conversation id, last visible turn position)]``, the conversation first.

    Raises:
        NotFound: the conversation does not exist.
    """
    segments: list[tuple[str, int]] = []
    limit = UNLIMITED
    current: str | None = conversation_id
    while current is not None:
        row = await db.row("SELECT parent_id, fork_turn FROM conversation WHERE id = ?", (current,))
        if row is None:
            raise NotFound("conversation", current)
        segments.append((current, limit))
        if row[1] is not None:
            limit = min(limit, int(row[1]))
        current = row[0]
    return segments


async def chain_cte(
    db: Sql, conversation_id: str, upto: int | None = None
) -> tuple[str, list[Any]]:
    """Build ``WITH chain(cid, lim, depth) AS (VALUES ...)`` for a conversation's fork chain.

    Args:
        db: the connection.
        conversation_id: the conversation whose view is wanted.
        upto: cap every segment at this turn position (``None`` = everything visible).

    Returns:
        The CTE text (ending without a trailing comma) and its parameters.
    """
    segments = await chain(db, conversation_id)
    rows = ", ".join(db.dialect.chain_row() for _ in segments)
    params: list[Any] = []
    for depth, (cid, limit) in enumerate(segments):
        params += [cid, limit if upto is None else min(limit, upto), depth]
    return f"WITH chain(cid, lim, depth) AS (VALUES {rows})", params


async def last_position(db: Sql, conversation_id: str) -> int:
    """The highest turn position a conversation sees (0 before its first turn).

    Raises:
        NotFound: the conversation does not exist.
    """
    row = await db.row(
        "SELECT c.fork_turn, (SELECT max(position) FROM turn WHERE conversation_id = c.id)"
        " FROM conversation c WHERE c.id = ?",
        (conversation_id,),
    )
    if row is None:
        raise NotFound("conversation", conversation_id)
    fork_turn, own = row[0], row[1]
    if own is not None:
        return int(own)
    return int(fork_turn or 0)
