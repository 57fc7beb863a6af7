"""Store basics: lifecycle, conversations, resolving ids, listing, turns."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from cove.errors import AmbiguousId, Busy, NotFound, StoreError
from cove.persistence.store import Store
from cove.results import TurnOutcome, Usage
from tests.persistence.store_helpers import (
    FakeClock,
    add_iteration,
    add_turn,
    count,
    write_file,
)


async def test_open_as_awaitable_and_close_guards_later_use(db_path: Path) -> None:
    store = await Store.open(db_path)
    assert store.path == str(db_path)
    await store.aclose()
    await store.aclose()  # closing twice is harmless

    with pytest.raises(StoreError, match="closed"):
        await store.list_conversations()


async def test_missing_parent_folders_are_created(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "data" / "cove" / "cove.db") as store:
        assert await store.list_conversations() == []


async def test_a_path_that_cannot_hold_a_database_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    write_file(blocker, b"")
    with pytest.raises(StoreError, match="cannot open database"):
        await Store.open(blocker / "cove.db")


async def test_memory_database_works_for_tests() -> None:
    async with Store.open(":memory:") as store:
        conversation = await store.create_conversation(channel="cli")
        assert (await store.get_conversation(conversation.id)).channel == "cli"


async def test_create_conversation_records_every_field(store: Store, clock: FakeClock) -> None:
    conversation = await store.create_conversation(
        channel="telegram", title="Prices", external_id="42", workspace="/tmp/ws"
    )

    assert re.fullmatch(r"[0-9a-f]{32}", conversation.id)
    assert (conversation.channel, conversation.title, conversation.external_id) == (
        "telegram",
        "Prices",
        "42",
    )
    assert conversation.workspace == "/tmp/ws"
    assert conversation.parent_id is None and conversation.fork_turn is None
    assert conversation.created_at == conversation.updated_at <= clock.now
    assert conversation.turn_count == 0
    assert await store.get_conversation(conversation.id) == conversation


async def test_find_external_finds_by_channel_and_external_id(store: Store) -> None:
    conversation = await store.create_conversation(channel="telegram", external_id="42")

    assert await store.find_external("telegram", "42") == conversation
    assert await store.find_external("telegram", "43") is None
    assert await store.find_external("web", "42") is None


async def test_a_second_conversation_for_one_external_id_is_refused(
    store: Store, db_path: Path
) -> None:
    first = await store.create_conversation(channel="telegram", external_id="42")

    with pytest.raises(StoreError, match=first.id):
        await store.create_conversation(channel="telegram", external_id="42")

    assert count(db_path, "conversation") == 1


async def test_unknown_ids_are_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="no conversation matches 'nope'"):
        await store.get_conversation("nope")
    with pytest.raises(NotFound):
        await store.get_turn(999)
    with pytest.raises(NotFound):
        await store.start_turn("nope", "question")
    with pytest.raises(NotFound):
        await store.set_title("nope", "title")
    with pytest.raises(NotFound):
        await store.turns("nope")
    with pytest.raises(NotFound):
        await store.subqueries(999)
    with pytest.raises(NotFound):
        await store.recent_blocks("nope", 5)
    with pytest.raises(NotFound):
        await store.vars_as_of("nope")
    with pytest.raises(NotFound):
        await store.search("anything", conversation_id="nope")


async def test_resolve_by_exact_id_and_unique_prefix(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")

    assert await store.resolve(conversation.id) == conversation
    assert await store.resolve(conversation.id[:12]) == conversation


async def test_resolve_refuses_an_ambiguous_prefix_listing_the_candidates(
    store: Store, db_path: Path
) -> None:
    by_first_char: defaultdict[str, list[str]] = defaultdict(list)
    # 17 random hex ids: two of them must share their first character.
    for _ in range(17):
        conversation = await store.create_conversation(channel="cli")
        by_first_char[conversation.id[0]].append(conversation.id)
    prefix, candidates = next((c, ids) for c, ids in by_first_char.items() if len(ids) > 1)

    with pytest.raises(AmbiguousId) as raised:
        await store.resolve(prefix)

    assert sorted(raised.value.candidates) == sorted(candidates)
    assert all(candidate in str(raised.value) for candidate in candidates[:10])
    assert count(db_path, "conversation") == 17


@pytest.mark.parametrize("key", ["", "zz", "%", "_"])
async def test_resolve_without_a_match_is_not_found(store: Store, key: str) -> None:
    await store.create_conversation(channel="cli")
    with pytest.raises(NotFound):
        await store.resolve(key)


async def test_list_conversations_newest_first_with_filters_and_pages(store: Store) -> None:
    first = await store.create_conversation(channel="cli")
    second = await store.create_conversation(channel="web")
    third = await store.create_conversation(channel="cli")
    await add_turn(store, first.id)  # touching a conversation makes it the newest

    listed = await store.list_conversations()
    assert [c.id for c in listed] == [first.id, third.id, second.id]
    assert [c.turn_count for c in listed] == [1, 0, 0]
    assert [c.id for c in await store.list_conversations(channel="cli")] == [first.id, third.id]
    assert [c.id for c in await store.list_conversations(limit=1)] == [first.id]
    page = await store.list_conversations(before=listed[0].updated_at, limit=1)
    assert [c.id for c in page] == [third.id]


async def test_set_title_renames(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    await store.set_title(conversation.id, "Monthly totals")
    renamed = await store.get_conversation(conversation.id)
    assert renamed.title == "Monthly totals"
    assert renamed.updated_at > conversation.updated_at


async def test_turns_are_numbered_from_one_and_finished_with_their_results(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    first = await store.start_turn(conversation.id, "sum prices", model="m1")
    assert (first.position, first.status, first.model, first.finished_at) == (
        1,
        "running",
        "m1",
        None,
    )

    finished = await store.finish_turn(
        first.id, TurnOutcome("done", answer="42", confidence="high", usage=Usage(100, 20, 0.5))
    )
    second = await store.start_turn(conversation.id, "again")

    assert (finished.status, finished.answer, finished.confidence) == ("done", "42", "high")
    assert (finished.usage.tokens_in, finished.usage.tokens_out, finished.usage.cost_usd) == (
        100,
        20,
        0.5,
    )
    assert finished.finished_at is not None and finished.error is None
    assert second.position == 2
    assert await store.get_turn(first.id) == finished
    assert [t.id for t in await store.turns(conversation.id)] == [first.id, second.id]


async def test_finish_turn_refuses_bad_status_and_a_finished_turn(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conversation.id, "q")

    with pytest.raises(StoreError, match="not a finished turn status"):
        await store.finish_turn(turn.id, TurnOutcome("running"))
    await store.finish_turn(turn.id, TurnOutcome("failed", error="endpoint down"))
    with pytest.raises(Busy, match="no longer running"):
        await store.finish_turn(turn.id, TurnOutcome("done", answer="x"))
    with pytest.raises(NotFound):
        await store.finish_turn(999, TurnOutcome("done", answer="x"))
    assert (await store.get_turn(turn.id)).error == "endpoint down"


async def test_finishing_a_turn_ends_iterations_it_left_running(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conversation.id, "q")
    await add_iteration(store, turn.id, 0)
    await store.start_iteration(
        turn.id, 1, system_prompt="s", request_message="q", context_message="c"
    )

    await store.finish_turn(turn.id, TurnOutcome("cancelled"))

    transcript = await store.transcript(conversation.id)
    assert [i.status for i in transcript.turns[0].iterations] == ["ok", "cancelled"]
