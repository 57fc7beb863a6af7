"""A conversation's branches as the chat page shows them: the tree of conversations forked from
one another, where it was forked from, and over each turn asked in several branches which of
that turn's versions this is ("‹ 2/3 ›"), one click from the others.

A fork holds its parent's turns up to its fork point and asks its own from the turn after, so
every turn of a tree has one owner: the conversation that asked it. The versions of turn ``p``
seen from a conversation are the turns ``p`` of the tree whose owners share its turns before
``p`` (the same owner of turn ``p - 1``; for turn 1, the whole tree). A retry or an edit of turn
``p`` is a fork at ``p - 1``, so it is one of them from whichever conversation of the tree it
was made, a branch of a branch as much as a fork of the original.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cove.conversation import ConversationRecord, Conversations
from cove.text import headline

#: How much of a version's request names it beside the turn.
ASKED_CHARS = 40


@dataclass(frozen=True)
class Version:
    """One version of a turn: the conversation that asked it, and what it asked."""

    conversation: ConversationRecord
    asked: str


@dataclass(frozen=True)
class Switch:
    """The versions of one turn, in the order they were made, and which one a page shows."""

    position: int
    versions: tuple[Version, ...]
    index: int  # the shown one, 0-based

    @property
    def previous(self) -> Version | None:
        """The version before the shown one (None: it is the first)."""
        return self.versions[self.index - 1] if self.index > 0 else None

    @property
    def next(self) -> Version | None:
        """The version after the shown one (None: it is the last)."""
        return self.versions[self.index + 1] if self.index + 1 < len(self.versions) else None


@dataclass(frozen=True)
class Node:
    """A conversation of the tree with the forks made from it, oldest first."""

    conversation: ConversationRecord
    children: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Branches:
    """What the chat page shows of a conversation's branches."""

    #: The conversation this one was forked from (None: not a fork, or it is gone).
    parent: ConversationRecord | None = None
    #: The whole tree from its root (None: this conversation is alone in it).
    tree: Node | None = None
    #: How many conversations the tree holds.
    size: int = 1
    #: Turn position → that turn's versions (only turns asked in more than one way).
    switches: dict[int, Switch] = field(default_factory=dict)


async def branches(
    convs: Conversations, conversation: ConversationRecord, requests: Mapping[int, str]
) -> Branches:
    """The branches around ``conversation``, whose page shows the turns ``requests`` holds.

    Args:
        convs: The conversations.
        conversation: The one whose page is shown.
        requests: Turn position → request, of the turns the page shows (a version of such a
            turn is named without reading it again).
    """
    if conversation.parent_id is None and not await convs.forks(conversation.id):
        return Branches()  # no fork and none made from it (most): as cheap as one empty read
    members = {m.id: m for m in await convs.fork_tree(conversation.id)}
    placed = _placed(members, conversation)
    named = await _named(convs, placed, requests)
    switches = {
        position: Switch(
            position,
            tuple(
                Version(o, headline(named.get((o.id, position), ""), ASKED_CHARS)) for o in owners
            ),
            [o.id for o in owners].index(mine),
        )
        for position, (owners, mine) in placed.items()
    }
    parent = members.get(conversation.parent_id or "")
    return Branches(parent, tree_of(list(members.values())), len(members), switches)


#: Turn position → its versions (the conversations that asked it) and the one a page shows.
Placed = dict[int, tuple[list[ConversationRecord], str]]


def _placed(members: Mapping[str, ConversationRecord], here: ConversationRecord) -> Placed:
    """The turns of ``here`` asked in more than one way, with their versions."""
    placed: Placed = {}
    for position in versioned_turns(members.values(), here):
        owners = versions_of(members, here.id, position)
        if len(owners) > 1:
            placed[position] = (owners, owner_of(members, here.id, position))
    return placed


async def _named(
    convs: Conversations, placed: Placed, shown: Mapping[int, str]
) -> dict[tuple[str, int], str]:
    """What each version asked, by (conversation, position): the page's own turns from the
    page, a fork's first own turn from its record, the others in one read."""
    named: dict[tuple[str, int], str] = {}
    unknown: list[tuple[str, int]] = []
    for position, (owners, mine) in placed.items():
        for owner in owners:
            if owner.id == mine and position in shown:
                named[owner.id, position] = shown[position]
            elif (owner.fork_turn or 0) + 1 == position:
                named[owner.id, position] = owner.first_request or ""
            else:
                unknown.append((owner.id, position))
    if unknown:
        named.update(await convs.turn_requests(unknown))
    return named


def asks(record: ConversationRecord, position: int) -> bool:
    """Whether ``record`` asked turn ``position`` itself (not inherited from its parent)."""
    return (record.fork_turn or 0) < position <= record.turn_count


def owner_of(members: Mapping[str, ConversationRecord], cid: str, position: int) -> str:
    """The conversation of the tree that asked turn ``position`` as ``cid`` sees it.

    Turn 0 (before any turn) is the root's: every conversation of the tree shares it.
    """
    record = members[cid]
    while record.fork_turn is not None and position <= record.fork_turn:
        parent = members.get(record.parent_id or "")
        if parent is None:
            break
        record = parent
    return record.id


def versioned_turns(members: Iterable[ConversationRecord], here: ConversationRecord) -> list[int]:
    """The turns of ``here`` that may have versions: each fork's first own turn.

    Two versions of a turn cannot both have asked the turn before it, so one of them starts
    there: only those turns need looking at.
    """
    starts = {(m.fork_turn or 0) + 1 for m in members if m.parent_id is not None}
    return sorted(p for p in starts if p <= here.turn_count)


def versions_of(
    members: Mapping[str, ConversationRecord], cid: str, position: int
) -> list[ConversationRecord]:
    """The conversations that asked their own turn ``position`` after the same turns as ``cid``,
    in the order they were made (``members`` is oldest first)."""
    before = owner_of(members, cid, position - 1)
    return [
        m
        for m in members.values()
        if asks(m, position) and owner_of(members, m.id, position - 1) == before
    ]


def tree_of(ordered: list[ConversationRecord]) -> Node:
    """The tree of ``ordered`` (oldest first: its root is the first)."""
    children: dict[str, list[ConversationRecord]] = {}
    for member in ordered[1:]:
        children.setdefault(member.parent_id or "", []).append(member)

    def node(record: ConversationRecord) -> Node:
        return Node(record, tuple(node(c) for c in children.get(record.id, [])))

    return node(ordered[0])
