"""A conversation's extensions and the approvals of their calls (migration 0021).

``conversation_extensions`` keeps, per conversation, the names of the extensions it runs with
(chosen at creation, copied to a fork, used again on reopen and replay) and its own approval
policy: entries set for it and answers its person asked to remember. ``approval`` keeps each
decision on an extension call the policy did not simply allow, keyed by the turn, the iteration,
the block and the call's order among the block's extension calls (all of them, so the key does
not depend on the policy), so a replay gives the same answers back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cove.errors import NotFound
from cove.persistence.database import Call


@dataclass(frozen=True)
class ExtensionUse:
    """What a conversation was given: its extensions' names and its own policy entries."""

    names: tuple[str, ...]
    policy: Mapping[str, str]


#: How each reason of a decision reads to people (``ApprovalRecord.why``).
REASONS = {
    "policy": "by the policy",
    "person": "by the person",
    "remembered": "as the person said to remember",
    "timeout": "nobody answered in time",
    "nobody": "nobody to ask",
    "flag": "for the whole run (--approve-all / --reject-all)",
}


@dataclass(frozen=True)
class ApprovalRecord:
    """One decision on an extension call, with where it happened.

    Attributes:
        turn_position: The turn's position in its conversation.
        iteration_position: The iteration's position in its turn (0-based).
        block_position: The block's position in its iteration (0-based).
        seq: The call's order among the block's extension calls (0-based).
        extension: The extension of the function called.
        function: The function called.
        effect: Its effect (``write``, ``network``, …).
        arguments: A short text of the call's arguments.
        approved: Whether the call ran.
        reason: What decided it: ``policy``, ``person``, ``remembered``, ``timeout``, ``nobody``
            or ``flag``.
        remember: The person asked that the answer hold for the rest of the conversation.
        at: When it was decided (seconds since the epoch).
    """

    turn_position: int
    iteration_position: int
    block_position: int
    seq: int
    extension: str
    function: str
    effect: str
    arguments: str
    approved: bool
    reason: str
    remember: bool = False
    at: float = 0.0

    @property
    def why(self) -> str:
        """What decided it, in words (``by the person``, ``nobody answered in time``…)."""
        return REASONS.get(self.reason, self.reason)


async def set_extension_use(
    call: Call, conversation_id: str, names: Sequence[str], policy: Mapping[str, str]
) -> None:
    """Record (or replace) the extensions and the policy of a conversation.

    Raises:
        NotFound: Unknown conversation.
    """
    async with call.writing() as db:
        if await db.row("SELECT 1 FROM conversation WHERE id = ?", (conversation_id,)) is None:
            raise NotFound("conversation", conversation_id)
        await db.run(
            "INSERT INTO conversation_extensions (conversation_id, names, policy) VALUES (?, ?, ?)"
            " ON CONFLICT (conversation_id) DO UPDATE SET names = excluded.names,"
            " policy = excluded.policy",
            (conversation_id, json.dumps(list(names)), json.dumps(dict(policy), sort_keys=True)),
        )


async def extension_use(call: Call, conversation_id: str) -> ExtensionUse | None:
    """What the conversation was given; None for one created before it was recorded."""
    async with call.reading() as db:
        row = await db.row(
            "SELECT names, policy FROM conversation_extensions WHERE conversation_id = ?",
            (conversation_id,),
        )
    if row is None:
        return None
    return ExtensionUse(tuple(json.loads(row["names"])), json.loads(row["policy"]))


async def remember_rule(call: Call, conversation_id: str, key: str, rule: str) -> None:
    """Add ``key = rule`` to the conversation's own policy (an answer to remember).

    Raises:
        NotFound: The conversation has no recorded extensions.
    """
    async with call.writing() as db:
        row = await db.row(
            "SELECT policy FROM conversation_extensions WHERE conversation_id = ?",
            (conversation_id,),
        )
        if row is None:
            raise NotFound("conversation", conversation_id)
        policy = {**json.loads(row["policy"]), key: rule}
        await db.run(
            "UPDATE conversation_extensions SET policy = ? WHERE conversation_id = ?",
            (json.dumps(policy, sort_keys=True), conversation_id),
        )


async def record_approval(call: Call, conversation_id: str, record: ApprovalRecord) -> None:
    """Keep one decision; one already kept at the same place stays as it is."""
    async with call.writing() as db:
        await db.run(
            "INSERT INTO approval (conversation_id, turn_position, iteration_position,"
            " block_position, seq, extension, function, effect, arguments, approved, reason,"
            " remember, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (
                conversation_id,
                record.turn_position,
                record.iteration_position,
                record.block_position,
                record.seq,
                record.extension,
                record.function,
                record.effect,
                record.arguments,
                int(record.approved),
                record.reason,
                int(record.remember),
                call.now,
            ),
        )


async def approvals(
    call: Call, conversation_id: str, turn_position: int | None = None
) -> list[ApprovalRecord]:
    """The conversation's decisions in order (of one turn when ``turn_position`` is given)."""
    query = (
        "SELECT turn_position, iteration_position, block_position, seq, extension, function,"
        " effect, arguments, approved, reason, remember, created_at FROM approval"
        " WHERE conversation_id = ?"
    )
    params: list[object] = [conversation_id]
    if turn_position is not None:
        query += " AND turn_position = ?"
        params.append(turn_position)
    query += " ORDER BY turn_position, iteration_position, block_position, seq"
    async with call.reading() as db:
        rows = await db.rows(query, params)
    return [
        ApprovalRecord(
            turn_position=int(row["turn_position"]),
            iteration_position=int(row["iteration_position"]),
            block_position=int(row["block_position"]),
            seq=int(row["seq"]),
            extension=row["extension"],
            function=row["function"],
            effect=row["effect"],
            arguments=row["arguments"],
            approved=bool(row["approved"]),
            reason=row["reason"],
            remember=bool(row["remember"]),
            at=float(row["created_at"]),
        )
        for row in rows
    ]
