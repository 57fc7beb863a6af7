"""The history budget: past versions keep at most the budget beyond the live state; past it the
oldest are thinned in a fixed order (middles, then each turn's last, then the first), never the
live versions nor what a fork sees, and what they held is collected."""

from __future__ import annotations

import random
from pathlib import Path

from cove.persistence.postgres.url import is_postgres
from cove.persistence.store import Store
from tests.persistence.store_helpers import raw
from tests.persistence.value_helpers import (
    check_value_store,
    tree,
    value_of,
    version,
    write_turn,
)

PIECE = 40_000  # bytes of each version's value: a chunk of its own, nothing shared
BUDGET = 100_000


def piece(seed: int) -> bytes:
    """A value no other version shares a chunk with."""
    return random.Random(seed).randbytes(PIECE)


async def write_turns(store: Store, conversation_id: str, name: str, turns: list[range]) -> None:
    """One turn per range, each writing a version of ``name`` per number in it."""
    for numbers in turns:
        await write_turn(store, conversation_id, *[version(name, n, piece(n)) for n in numbers])


async def thinned_versions(store: Store, conversation_id: str, name: str) -> set[int]:
    return {r.version for r in await store.var_history(conversation_id, name) if r.thinned}


async def test_past_the_budget_middles_go_first_then_turn_ends_never_the_first_or_live(
    database: str,
) -> None:
    async with Store.open(database, history_budget=BUDGET) as store:
        conversation = await store.create_conversation(channel="cli")
        # Each turn writes its versions in one block: turn 1 v1-v4, turn 2 v5-v8, turn 3 v9.
        await write_turns(store, conversation.id, "x", [range(1, 5), range(5, 9), range(9, 10)])
        await store.keep_history(conversation.id)
        figures = await store.history(conversation.id)
        thinned = await thinned_versions(store, conversation.id, "x")
    assert figures.history_bytes <= BUDGET < 8 * PIECE
    assert figures.thinned == len(thinned) > 0
    middles, ends = {2, 3, 5, 6, 7}, {4, 8}
    assert 1 not in thinned and 9 not in thinned  # the first and the live version
    assert middles <= thinned or not thinned & ends  # no turn's last before every middle


async def test_a_thinned_version_keeps_its_row_preview_and_digest_only(database: str) -> None:
    async with Store.open(database, history_budget=BUDGET) as store:
        conversation = await store.create_conversation(channel="cli")
        await write_turns(store, conversation.id, "x", [range(1, 9)])
        await store.keep_history(conversation.id)
        after = await store.var_version(conversation.id, "x", 3)
        assert after.thinned and after.encoded is None
        written = version("x", 3, piece(3))
        assert (after.digest, after.preview, after.type_name) == (
            tree(piece(3)).digest,
            written.preview,
            "bytes",
        )
        assert await value_of(store, conversation.id, "x", 1) == piece(1)
        assert await value_of(store, conversation.id, "x", 8) == piece(8)
        assert (await store.value_stats())["garbage"] == 0
    if not is_postgres(database):  # the counts, recomputed from the SQLite file itself
        with raw(Path(database)) as conn:
            check_value_store(conn)


async def test_a_loop_rewriting_a_value_cannot_fill_the_disk(database: str) -> None:
    async with Store.open(database, history_budget=BUDGET) as store:
        conversation = await store.create_conversation(channel="cli")
        for turn in range(15):  # 60 versions: 2.4 MB if every one were kept
            await write_turns(store, conversation.id, "x", [range(4 * turn + 1, 4 * turn + 5)])
        figures = await store.history(conversation.id)
        assert await value_of(store, conversation.id, "x", 60) == piece(60)
        stored = (await store.value_stats())["bytes"]
    # Between two checks the history grows by at most the budget (the check is due then).
    assert stored <= figures.live_bytes + 2 * BUDGET + PIECE
    assert figures.thinned >= 50


async def test_what_a_fork_sees_is_never_thinned(database: str) -> None:
    async with Store.open(database, history_budget=BUDGET) as store:
        parent = await store.create_conversation(channel="cli")
        await write_turns(store, parent.id, "x", [range(1, 3)])
        fork = await store.create_conversation(channel="cli", parent_id=parent.id, fork_turn=1)
        await write_turns(store, parent.id, "x", [range(3, 5), range(5, 12)])
        await store.keep_history(parent.id)
        assert 2 not in await thinned_versions(store, parent.id, "x")
        assert (await store.vars_as_of(fork.id))["x"].version == 2
        assert await value_of(store, fork.id, "x", 2) == piece(2)
        assert (await store.history(parent.id)).history_bytes <= BUDGET


async def test_values_kept_in_their_row_are_kept_whatever_the_budget(database: str) -> None:
    async with Store.open(database, history_budget=1) as store:
        conversation = await store.create_conversation(channel="cli")
        await write_turn(store, conversation.id, version("n", 1, 1), version("x", 1, piece(1)))
        await write_turn(store, conversation.id, version("n", 2, 2), version("x", 2, piece(2)))
        await write_turn(store, conversation.id, version("n", 3, 3), version("x", 3, piece(3)))
        await store.keep_history(conversation.id)
        assert await value_of(store, conversation.id, "n", 2) == 2  # the middle one, inline
        assert await value_of(store, conversation.id, "n", 1) == 1
        # A tiny budget thins even the first version of a large value; never the live one.
        assert await thinned_versions(store, conversation.id, "x") == {1, 2}
        assert await thinned_versions(store, conversation.id, "n") == set()
