"""The value store: a version writes the chunks the database lacks; versions, forks and equal
values in other conversations share them; deleting frees what nothing else holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cove.errors import StoreError
from cove.persistence.store import Store
from tests.persistence.store_helpers import count, raw
from tests.persistence.value_helpers import (
    check_value_store,
    chunk_bytes,
    value_of,
    version,
    write_turn,
)

NUMBERS = list(range(100_000))


async def test_two_versions_share_the_chunks_an_edit_did_not_touch(
    store: Store, db_path: Path
) -> None:
    conversation = await store.create_conversation(channel="cli")
    await write_turn(store, conversation.id, version("nums", 1, NUMBERS))
    first = chunk_bytes(db_path)
    longer = [*NUMBERS, -1]
    await write_turn(store, conversation.id, version("nums", 2, longer))
    assert chunk_bytes(db_path) - first <= 16 * 1024  # the tail, not another 600 KB
    assert await value_of(store, conversation.id, "nums", 1) == NUMBERS
    assert await value_of(store, conversation.id, "nums", 2) == longer
    with raw(db_path) as conn:
        check_value_store(conn)


async def test_a_fork_shares_everything_and_its_edits_cost_what_changed(
    store: Store, db_path: Path
) -> None:
    parent = await store.create_conversation(channel="cli")
    await write_turn(store, parent.id, version("nums", 1, NUMBERS))
    before = count(db_path, "value_chunk")
    fork = await store.create_conversation(channel="cli", parent_id=parent.id, fork_turn=1)
    assert count(db_path, "value_chunk") == before
    assert await value_of(store, fork.id, "nums", 1) == NUMBERS
    edited = NUMBERS.copy()
    edited[50_000] = -1
    size = chunk_bytes(db_path)
    await write_turn(store, fork.id, version("nums", 2, edited))
    assert chunk_bytes(db_path) - size <= 16 * 1024
    assert await value_of(store, fork.id, "nums", 2) == edited
    assert await value_of(store, parent.id, "nums", 1) == NUMBERS


async def test_equal_values_in_two_conversations_are_stored_once(
    store: Store, db_path: Path
) -> None:
    one = await store.create_conversation(channel="cli")
    other = await store.create_conversation(channel="cli")
    await write_turn(store, one.id, version("nums", 1, NUMBERS))
    stored = (count(db_path, "value_chunk"), chunk_bytes(db_path))
    await write_turn(store, other.id, version("same", 1, NUMBERS))
    assert (count(db_path, "value_chunk"), chunk_bytes(db_path)) == stored
    await store.delete_conversation(one.id)
    assert await value_of(store, other.id, "same", 1) == NUMBERS
    with raw(db_path) as conn:
        check_value_store(conn)
    await store.delete_conversation(other.id)
    assert count(db_path, "value_chunk") == count(db_path, "value_ref") == 0


async def test_deleting_frees_only_what_nothing_else_holds(store: Store, db_path: Path) -> None:
    kept = await store.create_conversation(channel="cli")
    gone = await store.create_conversation(channel="cli")
    await write_turn(store, kept.id, version("nums", 1, NUMBERS))
    await write_turn(store, gone.id, version("nums", 1, [*NUMBERS, 7]))
    await write_turn(store, gone.id, version("text", 1, "x" * 300_000 + "y"))
    await store.delete_conversation(gone.id)
    with raw(db_path) as conn:
        check_value_store(conn)
        assert conn.execute("SELECT count(*) FROM value_ref WHERE refs = 0").fetchone()[0] == 0
    alone = await store.create_conversation(channel="cli")
    await write_turn(store, alone.id, version("nums", 1, NUMBERS))
    assert count(db_path, "value_chunk") == (await store.value_stats())["chunks"]
    assert await value_of(store, kept.id, "nums", 1) == NUMBERS


async def test_a_version_naming_a_chunk_that_is_not_stored_is_refused(
    store: Store, db_path: Path
) -> None:
    conversation = await store.create_conversation(channel="cli")
    whole = version("nums", 1, NUMBERS)
    leaf_first = replace(whole, chunks=whole.chunks[1:])  # a child missing
    with pytest.raises(StoreError, match="not stored"):
        await write_turn(store, conversation.id, leaf_first)
    assert count(db_path, "value_chunk") == count(db_path, "var_version") == 0


async def test_a_chunk_that_is_not_what_its_name_says_is_refused(
    store: Store, db_path: Path
) -> None:
    conversation = await store.create_conversation(channel="cli")
    whole = version("nums", 1, NUMBERS)
    name, data = whole.chunks[0]
    forged = replace(whole, chunks=((name, data + b" "), *whole.chunks[1:]))
    with pytest.raises(StoreError, match="does not hold what its name says"):
        await write_turn(store, conversation.id, forged)
    assert count(db_path, "value_chunk") == 0


async def test_small_values_stay_inline_and_read_as_before(store: Store, db_path: Path) -> None:
    conversation = await store.create_conversation(channel="cli")
    await write_turn(store, conversation.id, version("n", 1, 42), version("s", 1, "hi"))
    assert await value_of(store, conversation.id, "n", 1) == 42
    assert count(db_path, "value_chunk") == 0
    record = await store.var_version(conversation.id, "s", 1)
    assert record.encoded == '"hi"' and record.digest is not None and not record.thinned
