"""The reads a turn's start makes: the last turn, its thinking, the journal's blocks (bounded)."""

from __future__ import annotations

import pytest

from cove.errors import NotFound
from cove.persistence.store import Store
from tests.persistence.store_helpers import add_iteration, add_turn, iteration_write


async def test_last_turn_is_the_latest_visible_one_forks_included(store: Store) -> None:
    parent = await store.create_conversation(channel="cli")
    assert await store.last_turn(parent.id) is None
    for request in ("one", "two", "three"):
        await add_turn(store, parent.id, request)
    fork = await store.create_conversation(channel="cli", parent_id=parent.id, fork_turn=2)

    assert (await store.last_turn(parent.id)) == (await store.turns(parent.id))[-1]
    found = await store.last_turn(fork.id)
    assert found is not None and (found.request, found.position) == ("two", 2)
    await store.start_turn(fork.id, "fork's own")
    found = await store.last_turn(fork.id)
    assert found is not None and (found.request, found.position) == ("fork's own", 3)
    with pytest.raises(NotFound):
        await store.last_turn("nope")


async def test_last_thinking_skips_iterations_without_any(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conversation.id, "q")
    assert await store.last_thinking(turn.id) is None
    await add_iteration(store, turn.id, 0, iteration_write(thinking="first idea"))
    await add_iteration(store, turn.id, 1, iteration_write(thinking="second idea"))
    await add_iteration(store, turn.id, 2, iteration_write(thinking=""))
    assert await store.last_thinking(turn.id) == "second idea"


async def test_last_blocks_match_recent_blocks_within_the_latest_turns(store: Store) -> None:
    parent = await store.create_conversation(channel="cli")
    for _ in range(4):
        turn = await store.start_turn(parent.id, "q")
        await add_iteration(store, turn.id, 0, iteration_write(blocks=2, code="a{n}"))
        await add_iteration(store, turn.id, 1, iteration_write(blocks=0))
        await add_iteration(store, turn.id, 2, iteration_write(blocks=1, code="b{n}"))
    fork = await store.create_conversation(channel="cli", parent_id=parent.id, fork_turn=2)
    fork_turn = await store.start_turn(fork.id, "q")
    await add_iteration(store, fork_turn.id, 0, iteration_write(blocks=1, code="f{n}"))

    for conversation_id in (parent.id, fork.id):
        for limit in (0, 1, 3, 5, 9, 50):
            expected = await store.recent_blocks(conversation_id, limit)
            got = await store.last_blocks(conversation_id, limit)
            assert [(t, i, b.id) for t, i, b in got] == [(t, i, b.id) for t, i, b in expected]
    assert [b.code for _, _, b in await store.last_blocks(fork.id, 3)] == ["a1", "b0", "f0"]


async def test_last_blocks_look_back_only_as_many_turns_as_blocks_wanted(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    turn = await store.start_turn(conversation.id, "with code")
    await add_iteration(store, turn.id, 0, iteration_write(blocks=1, code="old"))
    for _ in range(3):
        chat = await store.start_turn(conversation.id, "chat only")
        await add_iteration(store, chat.id, 0, iteration_write(blocks=0))
    assert [b.code for _, _, b in await store.last_blocks(conversation.id, 4)] == ["old"]
    assert await store.last_blocks(conversation.id, 3) == []
