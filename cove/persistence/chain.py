"""The fork chain: which conversations' turns a conversation sees, and up to which position.

A fork copies nothing. It sees its parent's turns up to ``fork_turn`` (and, recursively, what
the parent saw up to that point), then its own turns, which are numbered from ``fork_turn + 1``.
Reads express this as a small ``chain(cid, lim, depth)`` CTE joined against ``turn``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from cove.errors import NotFound

# Stands for "no limit" in a chain segment; larger than any turn position.
UNLIMITED = 1 << 62


def chain(conn: sqlite3.Connection, conversation_id: str) -> list[tuple[str, int]]:
    """Return ``[(conversation id, last visible turn position)]``, the conversation first.

    Raises:
        NotFound: the conversation does not exist.
    """
    segments: list[tuple[str, int]] = []
    limit = UNLIMITED
    current: str | None = conversation_id
    while current is not None:
        row = conn.execute(
            "SELECT parent_id, fork_turn FROM conversation WHERE id = ?", (current,)
        ).fetchone()
        if row is None:
            raise NotFound("conversation", current)
        segments.append((current, limit))
        if row[1] is not None:
            limit = min(limit, int(row[1]))
        current = row[0]
    return segments


def chain_cte(
    conn: sqlite3.Connection, conversation_id: str, upto: int | None = None
) -> tuple[str, list[Any]]:
    """Build ``WITH chain(cid, lim, depth) AS (VALUES ...)`` for a conversation's fork chain.

    Args:
        conn: the connection.
        conversation_id: the conversation whose view is wanted.
        upto: cap every segment at this turn position (``None`` = everything visible).

    Returns:
        The CTE text (ending without a trailing comma) and its parameters.
    """
    segments = chain(conn, conversation_id)
    rows = ", ".join("(?, ?, ?)" for _ in segments)
    params: list[Any] = []
    for depth, (cid, limit) in enumerate(segments):
        params += [cid, limit if upto is None else min(limit, upto), depth]
    return f"WITH chain(cid, lim, depth) AS (VALUES {rows})", params


def last_position(conn: sqlite3.Connection, conversation_id: str) -> int:
    """The highest turn position a conversation sees (0 before its first turn).

    Raises:
        NotFound: the conversation does not exist.
    """
    row = conn.execute(
        "SELECT c.fork_turn, (SELECT max(position) FROM turn WHERE conversation_id = c.id)"
        " FROM conversation c WHERE c.id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise NotFound("conversation", conversation_id)
    fork_turn, own = row
    if own is not None:
        return int(own)
    return int(fork_turn or 0)
