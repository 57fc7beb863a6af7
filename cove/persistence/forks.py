"""A conversation's forks: the conversations whose parent it is, with the turn each forked at.

Forks are found by the ``conversation_parent`` index; only direct forks are read (a fork of a
fork is the fork's own). The other direction, the conversation a fork was made from, is on the
fork's record (``parent_id``, ``fork_turn``).
"""

from __future__ import annotations

from typing import Any

from cove.errors import NotFound
from cove.persistence import rows
from cove.persistence.database import Call
from cove.persistence.records import ConversationRecord


async def forks(
    call: Call, conversation_id: str, *, owner: str | None = None
) -> list[ConversationRecord]:
    """The forks of a conversation, by the turn they forked at, then oldest first.

    Args:
        call: the call.
        conversation_id: the conversation whose forks are wanted (an exact id).
        owner: only forks of this owner (None: every fork).

    Returns:
        Their records (``fork_turn`` says where each forked; ``turn_count`` and the rest as
        lists show them); empty when the conversation has none.

    Raises:
        NotFound: the conversation does not exist.
    """
    params: list[Any] = [conversation_id]
    mine = ""
    if owner is not None:
        mine = " AND c.owner = ?"
        params.append(owner)
    query = (
        rows.CONVERSATION_SELECT
        + " WHERE c.parent_id = ?"
        + mine
        + " ORDER BY c.fork_turn, c.created_at, c.id"
    )
    async with call.reading() as db:
        if await db.row("SELECT 1 FROM conversation WHERE id = ?", (conversation_id,)) is None:
            raise NotFound("conversation", conversation_id)
        return [rows.conversation(row) for row in await db.rows(query, params)]
