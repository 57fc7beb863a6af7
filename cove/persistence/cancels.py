"""Cancel requests: how a process stops a turn that another process runs.

A turn runs in the process holding its conversation's lease; another process cannot reach its
tasks. ``request`` records a request for the conversation's running turn (idempotent: asking
again keeps the first asker and time); the holder reads ``pending`` while its turn runs, cancels
the turn as a local cancel does, and the request is deleted in the same transaction as the
turn's end (``clear``, called by ``finish_turn`` and by crash recovery's interruption). A request
names a turn, never a conversation, so it can never stop a later turn.
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


async def cancel_requested(call: Call, conversation_id: str) -> str | None:
    """Who asked the conversation's running turn to stop, or None when nobody did."""
    async with call.reading() as db:
        asker = await db.value(
            "SELECT r.requested_by FROM turn t JOIN cancel_request r ON r.turn_id = t.id"
            " WHERE t.conversation_id = ? AND t.status = 'running'",
            (conversation_id,),
        )
    return None if asker is None else str(asker)


async def clear(db: Sql, turns: str, params: list[object]) -> None:
    """Delete the requests of the selected turns (``turns`` selects turn ids); inside a write."""
    await db.run(f"DELETE FROM cancel_request WHERE turn_id IN ({turns})", params)
