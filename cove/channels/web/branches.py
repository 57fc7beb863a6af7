"""A conversation's branches as the chat page shows them: where it was forked from, the
branches made from it, and, beside each turn, the other versions of that turn.

Another version of turn ``p`` is a conversation that shares this one's turns up to ``p - 1``
and asks its own turn ``p``: a fork of this conversation at ``p - 1`` and, when this one is
itself a fork at ``p - 1``, the conversation it was forked from and that one's other forks
there. A retry or an edit of turn ``p`` makes such a fork, so its versions sit side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cove.conversation import ConversationRecord, Conversations
from cove.errors import NotFound


@dataclass(frozen=True)
class Branches:
    """What the chat page shows of a conversation's branches."""

    #: The conversation this one was forked from (None: not a fork, or it is gone).
    parent: ConversationRecord | None = None
    #: The conversations forked from this one, by the turn each forked at.
    forks: list[ConversationRecord] = field(default_factory=list)
    #: Turn position → the other conversations that ask their own version of that turn.
    versions: dict[int, list[ConversationRecord]] = field(default_factory=dict)


async def branches(convs: Conversations, conversation: ConversationRecord) -> Branches:
    """The branches around ``conversation`` (three reads at most: it, its parent, theirs)."""
    forks = await convs.forks(conversation.id)
    versions: dict[int, list[ConversationRecord]] = {}
    for fork in forks:
        versions.setdefault(_asked(fork), []).append(fork)
    parent = await _parent(convs, conversation)
    if parent is not None:
        position = _asked(conversation)
        siblings = [
            other
            for other in await convs.forks(parent.id)
            if other.id != conversation.id and other.fork_turn == conversation.fork_turn
        ]
        versions[position] = [parent, *siblings, *versions.get(position, [])]
    return Branches(parent, forks, versions)


def _asked(fork: ConversationRecord) -> int:
    """The first turn a fork asks itself (the turn after its fork point)."""
    return (fork.fork_turn or 0) + 1


async def _parent(
    convs: Conversations, conversation: ConversationRecord
) -> ConversationRecord | None:
    if conversation.parent_id is None:
        return None
    try:
        return await convs.get(conversation.parent_id)
    except NotFound:  # a parent cannot be deleted while it has forks; read as gone if it is
        return None
