"""A conversation's forks: the conversations whose parent it is, with the turn each forked at,
and the whole tree of forks a conversation belongs to.

Forks are found by the ``conversation_parent`` index; ``forks`` reads only direct forks (a fork
of a fork is the fork's own), ``tree`` every conversation linked to this one by forking, at any
depth, in one statement (the conversation missing from it: it does not exist). The other
direction, the conversation a fork was made from, is on the fork's record (``parent_id``,
``fork_turn``).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    mine, params = _owned_by(owner, conversation_id)
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


#: The conversations of one fork tree: up the parent links to the root, then down every fork.
TREE_IDS = """
WITH RECURSIVE up(id, parent_id) AS (
  SELECT id, parent_id FROM conversation WHERE id = ?
  UNION ALL
  SELECT p.id, p.parent_id FROM conversation p JOIN up ON p.id = up.parent_id
), tree(id) AS (
  SELECT id FROM up WHERE parent_id IS NULL
  UNION ALL
  SELECT f.id FROM conversation f JOIN tree ON f.parent_id = tree.id
)
"""


async def tree(
    call: Call, conversation_id: str, *, owner: str | None = None
) -> list[ConversationRecord]:
    """Every conversation of the fork tree ``conversation_id`` belongs to, oldest first.

    Args:
        call: the call.
        conversation_id: any conversation of the tree (an exact id).
        owner: only conversations of this owner (None: all of them).

    Returns:
        The tree's root (the conversation that is no fork) and every fork made from it, at any
        depth, by creation time; just the conversation itself when it was never forked and is
        no fork.

    Raises:
        NotFound: the conversation does not exist (or is not ``owner``'s).
    """
    mine, params = _owned_by(owner, conversation_id)
    query = (
        TREE_IDS
        + rows.CONVERSATION_SELECT
        + " WHERE c.id IN (SELECT id FROM tree)"
        + mine
        + " ORDER BY c.created_at, c.id"
    )
    async with call.reading() as db:
        found = [rows.conversation(row) for row in await db.rows(query, params)]
    if not any(record.id == conversation_id for record in found):  # it is in its own tree
        raise NotFound("conversation", conversation_id)
    return found


#: Turns named in one statement (two parameters each, well under either backend's limit).
_PAIRS_PER_READ = 400


async def requests(call: Call, turns: Sequence[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """The requests of turns, each a conversation's own (not one a fork sees of its parent).

    What names the versions of a turn across a fork tree, read in one statement for all.

    Args:
        call: the call.
        turns: (conversation id, turn position) pairs.

    Returns:
        (conversation id, position) → request, for the pairs that name a turn.
    """
    found: dict[tuple[str, int], str] = {}
    async with call.reading() as db:
        for start in range(0, len(turns), _PAIRS_PER_READ):
            chunk = turns[start : start + _PAIRS_PER_READ]
            which = " OR ".join(["(conversation_id = ? AND position = ?)"] * len(chunk))
            params = [value for pair in chunk for value in pair]
            query = f"SELECT conversation_id, position, request FROM turn WHERE {which}"
            for r in await db.rows(query, params):
                found[r["conversation_id"], r["position"]] = r["request"]
    return found


def _owned_by(owner: str | None, conversation_id: str) -> tuple[str, list[Any]]:
    """The clause keeping only ``owner``'s conversations (none: every one) and the parameters
    of a query about ``conversation_id`` with it."""
    if owner is None:
        return "", [conversation_id]
    return " AND c.owner = ?", [conversation_id, owner]
