"""A conversation's profile: its instructions and its model, versioned by turn (migration 0022).

Each change is one ``conversation_profile`` row holding the whole profile (instructions and
model), kept with the turn position it applies from: a change made while turn N runs or after
it ended applies from turn N + 1, so every turn's profile stays what it ran with. The profile of
turn N is the newest row with ``from_turn <= N``; a fork sees its own rows first, then its
parent's as they stood for the turn after its fork point (``chain``), so a fork inherits the
profile and may change it without touching the parent's. Each read is one indexed lookup per
fork level, whatever the conversation's length.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from cove.persistence.chain import chain, last_position
from cove.persistence.database import Call
from cove.persistence.fence import check_fence
from cove.persistence.sql import Sql


class Keep(enum.Enum):
    """The marker of a profile field a change leaves as it is."""

    KEEP = "keep"


KEEP: Literal[Keep.KEEP] = Keep.KEEP


@dataclass(frozen=True)
class Profile:
    """What a conversation's turns run with beyond the settings.

    Attributes:
        instructions: The conversation's instructions (a persona, house rules, a task), shown
            to the model in the system prompt; None: none.
        model: The conversation's model; None: the configured one.
        from_turn: The first turn position this profile applies to (0: not changed in this
            conversation: the defaults, or what a fork inherited).
    """

    instructions: str | None = None
    model: str | None = None
    from_turn: int = 0


async def profile(call: Call, conversation_id: str, at_turn: int | None = None) -> Profile:
    """The profile of turn ``at_turn`` (None: the conversation's next turn).

    Raises:
        NotFound: unknown conversation.
    """
    async with call.reading() as db:
        return await _profile(db, conversation_id, at_turn)


async def change_profile(
    call: Call,
    conversation_id: str,
    *,
    instructions: str | Literal[Keep.KEEP] | None = KEEP,
    model: str | Literal[Keep.KEEP] | None = KEEP,
) -> Profile:
    """Change the profile from the conversation's next turn on; the fields left ``KEEP`` stay.

    The earlier rows are kept: the turns that ran keep the profile they ran with. Setting a
    field to the value it has records nothing.

    Returns:
        The profile the next turn runs with.

    Raises:
        NotFound: unknown conversation.
    """
    async with call.writing() as db:
        await check_fence(db, call.fence, conversation_id)
        current = await _profile(db, conversation_id, None)
        new = Profile(
            instructions=current.instructions if instructions is KEEP else instructions,
            model=current.model if model is KEEP else model,
            from_turn=await last_position(db, conversation_id) + 1,
        )
        if (new.instructions, new.model) == (current.instructions, current.model):
            return current
        await db.run(
            "INSERT INTO conversation_profile (conversation_id, from_turn, instructions, model,"
            " set_at) VALUES (?, ?, ?, ?, ?)",
            (conversation_id, new.from_turn, new.instructions, new.model, call.now),
        )
        return new


async def _profile(db: Sql, conversation_id: str, at_turn: int | None) -> Profile:
    """The newest row for ``at_turn`` along the fork chain (own rows first)."""
    position = at_turn if at_turn is not None else await last_position(db, conversation_id) + 1
    for depth, (cid, limit) in enumerate(await chain(db, conversation_id)):
        # An ancestor is seen as it stood for the turn after the fork point.
        bound = position if depth == 0 else min(position, limit + 1)
        row = await db.row(
            "SELECT instructions, model, from_turn FROM conversation_profile"
            " WHERE conversation_id = ? AND from_turn <= ? ORDER BY from_turn DESC, id DESC"
            " LIMIT 1",
            (cid, bound),
        )
        if row is not None:
            return Profile(row[0], row[1], int(row[2]) if depth == 0 else 0)
    return Profile()
