"""What a dead process left, shown as crash recovery would record it (nothing is written)."""

from __future__ import annotations

import time
from dataclasses import replace

from cove.conversation.lease import owner_is_dead
from cove.persistence.leases import INTERRUPTED
from cove.persistence.records import ConversationRecord, IterationRecord, Transcript
from cove.results import Usage


def lease_is_live(conv: ConversationRecord) -> bool:
    """True while a live process holds the conversation's lease (so its running turn runs)."""
    return (
        conv.lease_owner is not None
        and (conv.lease_until or 0) > time.time()
        and not owner_is_dead(conv.lease_owner)
    )


def as_listed(record: ConversationRecord) -> ConversationRecord:
    """The record with a last turn left ``running`` by a dead process shown ``interrupted``.

    Recovery records it so on the next writing open, or when a follower notices; a list shows
    it at once.
    """
    if record.last_status == "running" and not lease_is_live(record):
        return replace(record, last_status="interrupted")
    return record


def as_recovered(transcript: Transcript) -> Transcript:
    """Show a dead process's running turns as crash recovery would record them.

    A read-only open cannot run recovery, so a turn whose process died would still read as
    ``running``; it is shown ``interrupted`` (nothing is written).
    """
    conv = transcript.conversation
    if lease_is_live(conv) or not any(t.status == "running" for t in transcript.turns):
        return transcript
    turns = []
    for turn in transcript.turns:
        if turn.status == "running" and turn.conversation_id == conv.id:
            iterations = tuple(
                replace(it, status="interrupted") if it.status == "running" else it
                for it in turn.iterations
            )
            turn = replace(
                turn,
                status="interrupted",
                error=INTERRUPTED,
                iterations=iterations,
                usage=_at_least(turn.usage, _recorded(iterations)),
            )
        turns.append(turn)
    return replace(transcript, turns=tuple(turns))


def _recorded(iterations: tuple[IterationRecord, ...]) -> Usage:
    """The usage of iterations and their sub-queries, as crash recovery sums it."""
    total = Usage()
    for it in iterations:
        total = sum((sq.usage for sq in it.subqueries), total + it.usage)
    return total


def _at_least(usage: Usage, recorded: Usage) -> Usage:
    """Each of ``usage``'s totals, raised to the ``recorded`` one where that is larger."""
    return Usage(
        max(usage.tokens_in, recorded.tokens_in),
        max(usage.tokens_out, recorded.tokens_out),
        max(usage.cost_usd, recorded.cost_usd),
    )
