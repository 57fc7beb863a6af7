"""A conversation's branches as the chat page shows them: where it was forked from, the
branches made from it, and, beside each turn, the other versions of that turn.

Another version of turn ``p`` is a conversation that shares this one's turns up to ``p - 1``
and has asked its own turn ``p``: a fork of this conversation at ``p - 1`` and, when this one
is itself a fork at ``p - 1``, the conversation it was forked from and that one's other forks
there. A retry or an edit of turn ``p`` makes such a fork, so its versions sit side by side,
each named by the request it asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cove.conversation import ConversationRecord, Conversations
from cove.errors import NotFound
from cove.text import headline

#: How much of a version's request names it beside the turn.
ASKED_CHARS = 40


@dataclass(frozen=True)
class Version:
    """Another conversation's own version of a turn: where it is and what it asked."""

    conversation: ConversationRecord
    asked: str


@dataclass(frozen=True)
class Branches:
    """What the chat page shows of a conversation's branches."""

    #: The conversation this one was forked from (None: not a fork, or it is gone).
    parent: ConversationRecord | None = None
    #: The conversations forked from this one, by the turn each forked at.
    forks: list[ConversationRecord] = field(default_factory=list)
    #: Turn position → the other conversations' versions of that turn.
    versions: dict[int, list[Version]] = field(default_factory=dict)


async def branches(convs: Conversations, conversation: ConversationRecord) -> Branches:
    """The branches around ``conversation``: its forks, its parent and the parent's forks."""
    forks = await convs.forks(conversation.id)
    versions: dict[int, list[Version]] = {}
    for fork in forks:
        if _has_asked(fork):
            versions.setdefault(_asked_at(fork), []).append(_own(fork))
    parent = await _parent(convs, conversation)
    if parent is not None:
        position = _asked_at(conversation)
        others = [
            _own(other)
            for other in await convs.forks(parent.id)
            if other.id != conversation.id
            and other.fork_turn == conversation.fork_turn
            and _has_asked(other)
        ]
        original = await _original(convs, parent, position)
        here = ([original] if original else []) + others + versions.get(position, [])
        if here:
            versions[position] = here
    return Branches(parent, forks, versions)


def _asked_at(fork: ConversationRecord) -> int:
    """The first turn a fork asks itself (the turn after its fork point)."""
    return (fork.fork_turn or 0) + 1


def _has_asked(fork: ConversationRecord) -> bool:
    return fork.turn_count >= _asked_at(fork)


def _own(fork: ConversationRecord) -> Version:
    """A fork's version of the turn after its fork point: its first own request."""
    return Version(fork, headline(fork.first_request or "", ASKED_CHARS))


async def _parent(
    convs: Conversations, conversation: ConversationRecord
) -> ConversationRecord | None:
    if conversation.parent_id is None:
        return None
    try:
        return await convs.get(conversation.parent_id)
    except NotFound:  # a parent cannot be deleted while it has forks; read as gone if it is
        return None


async def _original(
    convs: Conversations, parent: ConversationRecord, position: int
) -> Version | None:
    """The parent's version of turn ``position``, if it has asked one."""
    if parent.turn_count < position:
        return None
    try:
        transcript = await convs.inspect(parent.id, turn=position)
    except NotFound:
        return None
    asked = next((t.request for t in transcript.turns if t.position == position), None)
    return None if asked is None else Version(parent, headline(asked, ASKED_CHARS))
