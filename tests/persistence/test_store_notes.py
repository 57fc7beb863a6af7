"""Turn notes: nudges and sandbox restarts kept with their seq, read back with the transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.errors import NotFound
from cove.persistence.records import TurnNote
from cove.persistence.store import Store
from cove.results import TurnOutcome
from tests.persistence.store_helpers import count


async def test_notes_come_back_in_seq_order_with_their_turn(store: Store) -> None:
    conv = await store.create_conversation(channel="cli")
    first = await store.start_turn(conv.id, "one")
    await store.add_note(first.id, 90, "sandbox_restarted", "timeout", ["a"], ["b", "c"])
    await store.add_note(first.id, 70, "nudge", "add a title", nudge_kind="title")
    await store.add_note(first.id, 70, "nudge", "a second note under one seq is ignored")
    transcript = await store.transcript(conv.id)
    assert transcript.notes == (
        TurnNote(first.id, 1, 70, "nudge", "add a title", nudge_kind="title"),
        TurnNote(first.id, 1, 90, "sandbox_restarted", "timeout", ("a",), ("b", "c")),
    )
    await store.add_note(first.id, 95, "model_retry", "server error (HTTP 503)", retry=(1, 5))
    [retry] = [n for n in (await store.transcript(conv.id)).notes if n.kind == "model_retry"]
    assert (retry.seq, retry.text, retry.retry) == (95, "server error (HTTP 503)", (1, 5))
    second = await store.start_turn(conv.id, "two")
    await store.add_note(second.id, 5000, "nudge", "later")
    only_second = await store.transcript(conv.id, turn=2)
    assert [n.text for n in only_second.notes] == ["later"]
    since = await store.transcript_since(conv.id, 2)
    assert [n.turn_position for n in since.notes] == [2]


async def test_a_note_needs_a_known_turn(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.add_note(12345, 1, "nudge", "nobody's")


async def test_notes_go_with_their_conversation(store: Store, db_path: Path) -> None:
    conv = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conv.id, "one")
    await store.add_note(turn.id, 1, "nudge", "x")
    await store.finish_turn(turn.id, TurnOutcome("done", answer="ok"))
    await store.delete_conversation(conv.id)
    assert count(db_path, "turn_note") == 0
