"""What a fork is called: what it does with its parent's turns, then the parent's name.

A fork at turn N whose first request is the parent's request of turn N + 1 again is a retry
of that turn; with another request it is an edit of it; without one (or when the parent has no
turn N + 1 to ask differently) it is a branch from turn N. The part that tells forks apart
comes first, so that a list that cuts long names still shows it; a name one of the parent's
other forks already has gets a number.
"""

from __future__ import annotations

from collections.abc import Collection

from cove.text import headline

#: How much of an edited request names its fork.
EDIT_CHARS = 32
#: The longest title (what ``Conversations.rename`` keeps).
TITLE_CHARS = 200


def fork_title(
    parent_label: str,
    at_turn: int,
    *,
    asked: str | None,
    request: str | None,
    taken: Collection[str] = (),
) -> str:
    """The title of a new fork, e.g. ``Retry of turn 2 · Trip plan``.

    Args:
        parent_label: What lists call the parent (its title, else its first request's start).
        at_turn: The fork point (0: before the parent's first turn).
        asked: The request of the parent's turn ``at_turn + 1`` (None: it has none yet).
        request: What the fork will ask first, when the caller knows (a retry, an edit).
        taken: The titles of the parent's other forks.

    Returns:
        A title of at most ``TITLE_CHARS`` characters that none of ``taken`` has.
    """
    what = _what(at_turn, asked, request)
    return _unique(f"{what} · {parent_label}", set(taken))


def _what(at_turn: int, asked: str | None, request: str | None) -> str:
    """What the fork does: retry or edit the turn after its fork point, or branch there."""
    turn = at_turn + 1
    if request is not None and asked is not None:
        if request.strip() == asked.strip():
            return f"Retry of turn {turn}"
        return f"Edit of turn {turn}: “{headline(request, EDIT_CHARS)}”"
    if at_turn == 0:
        return "Branch before turn 1"
    return f"Branch from turn {at_turn}"


def _unique(title: str, taken: set[str]) -> str:
    """``title`` cut to ``TITLE_CHARS``; numbered (2), (3)… when a sibling has it already."""
    first = title[:TITLE_CHARS]
    if first not in taken:
        return first
    number = 2
    while True:
        suffix = f" ({number})"
        numbered = title[: TITLE_CHARS - len(suffix)] + suffix
        if numbered not in taken:
            return numbered
        number += 1
