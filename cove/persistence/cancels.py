"""Cancel requests: how a process stops a turn that another process runs.

A turn runs in the process holding its conversation's lease; another process cannot reach its
tasks. ``request`` records a request for the conversation's running turn (idempotent: asking
again keeps the first asker and time); the holder reads the requests (``cancel_requests``)
while its turn runs, cancels the turn as a local cancel does, and the request is deleted in the
same transaction as the turn's end (``clear``, called by ``finish_turn`` and by crash recovery's
interruption). A request names a turn, never a conversation, so it can never stop a later turn.
"""

from __future__ import annotations

from cove.errors import NotFound
from cove.persistence.database import Call
from cove.persistence.sql import Sql

_RUNNING = (
    "SELECT id FROM turn WHERE conversation_id = ? AND status = 'running'"
    " ORDER BY position DESC LIMIT 1"
)


async def request_cancel(call: Call, conversation_id: str, requested_by: str) -> int | None:
    """Ask the process running the conversation's turn to stop it.

    Idempotent: a turn keeps the first request. Returns the running turn's id, or None when no
    turn runs (nothing is recorded then).

    Raises:
        NotFound: unknown conversation.
    """
    async with call.writing() as db:
        if await db.row("SELECT 1 FROM conversation WHERE id = ?", (conversation_id,)) is None:
            raise NotFound("conversation", conversation_id)
        turn_id = await db.value(_RUNNING, (conversation_id,))
        if turn_id is None:
            return None
        await db.run(
            "INSERT INTO cancel_request (turn_id, requested_by, requested_at)"
            " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (turn_id, requested_by, call.now),
        )
        return int(turn_id)


async def cancel_requests(call: Call) -> dict[str, str]:
    """Who asked each running turn to stop, by conversation: every pending request in one read
    (requests live only while their turn runs, so there are few)."""
    async with call.reading() as db:
        rows = await db.rows(
            "SELECT t.conversation_id, r.requested_by FROM cancel_request r"
            " JOIN turn t ON t.id = r.turn_id WHERE t.status = 'running'"
        )
    return {str(row[0]): str(row[1]) for row in rows}


async def clear(db: Sql, turns: str, params: list[object]) -> None:
    """Delete the requests of the selected turns (``turns`` selects turn ids); inside a write."""
    await db.run(f"DELETE FROM cancel_request WHERE turn_id IN ({turns})", params)
