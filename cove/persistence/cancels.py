"""Cancel requests: how a process stops a turn that another process runs.

A turn runs in the process holding its conversation's lease; another process cannot reach its
tasks. ``request`` records a request for the conversation's running turn (idempotent: asking
again keeps the first asker and time); the holder reads ``pending`` while its turn runs, cancels
the turn as a local cancel does, and the request is deleted in the same transaction as the
turn's end (``clear``, called by ``finish_turn`` and by crash recovery's interruption). A request
names a turn, never a conversation, so it can never stop a later turn.
"""

from __future__ import annotations

import sqlite3

from cove.errors import NotFound
from cove.persistence.connection import immediate

_RUNNING = (
    "SELECT id FROM turn WHERE conversation_id = ? AND status = 'running'"
    " ORDER BY position DESC LIMIT 1"
)


def request(
    conn: sqlite3.Connection, now: float, conversation_id: str, requested_by: str
) -> int | None:
    """Ask the conversation's running turn to stop; its id, or None when no turn runs.

    Raises:
        NotFound: unknown conversation.
    """
    with immediate(conn):
        if (
            conn.execute("SELECT 1 FROM conversation WHERE id = ?", (conversation_id,)).fetchone()
            is None
        ):
            raise NotFound("conversation", conversation_id)
        row = conn.execute(_RUNNING, (conversation_id,)).fetchone()
        if row is None:
            return None
        conn.execute(
            "INSERT OR IGNORE INTO cancel_request (turn_id, requested_by, requested_at)"
            " VALUES (?, ?, ?)",
            (row[0], requested_by, now),
        )
        return int(row[0])


def pending(conn: sqlite3.Connection, conversation_id: str) -> str | None:
    """Who asked the conversation's running turn to stop, or None when nobody did."""
    row = conn.execute(
        "SELECT r.requested_by FROM turn t JOIN cancel_request r ON r.turn_id = t.id"
        " WHERE t.conversation_id = ? AND t.status = 'running'",
        (conversation_id,),
    ).fetchone()
    return None if row is None else str(row[0])


def clear(conn: sqlite3.Connection, turns: str, params: list[object]) -> None:
    """Delete the requests of the selected turns (``turns`` selects turn ids); inside a write."""
    conn.execute(f"DELETE FROM cancel_request WHERE turn_id IN ({turns})", params)
