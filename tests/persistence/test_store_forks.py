"""Forks (turn numbering, variables across the parent chain) and deleting conversations."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.errors import CoveError, NotFound, StoreError
from cove.persistence.records import VarVersionRecord
from cove.persistence.store import Store
from tests.persistence.store_helpers import add_iteration, add_turn, count, iteration_write, raw


async def _parent_with_three_turns(store: Store) -> str:
    """x is written as v1, v2, v3 in turns 1-3; y only in turn 1; z deleted in turn 3."""
    parent = await store.create_conversation(channel="cli", title="parent")
    await add_turn(store, parent.id, "one", variables={"x": (1, "1"), "y": (1, "10")})
    await add_turn(store, parent.id, "two", variables={"x": (2, "2"), "z": (1, "5")})
    await add_turn(store, parent.id, "three", variables={"x": (3, "3"), "z": (2, None)})
    return parent.id


def _values(found: dict[str, VarVersionRecord]) -> dict[str, tuple[int, str | None]]:
    return {name: (v.version, v.encoded) for name, v in found.items()}


async def test_a_fork_sees_the_parent_up_to_the_fork_turn_then_numbers_its_own(
    store: Store,
) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=2)

    own = await store.start_turn(fork.id, "fork's first")

    assert (fork.parent_id, fork.fork_turn, fork.turn_count) == (parent_id, 2, 2)
    assert own.position == 3
    assert [(t.request, t.position) for t in await store.turns(fork.id)] == [
        ("one", 1),
        ("two", 2),
        ("fork's first", 3),
    ]
    transcript = await store.transcript(fork.id)
    assert [t.conversation_id for t in transcript.turns] == [parent_id, parent_id, fork.id]
    assert [v.version for v in transcript.var_versions if v.name == "x"] == [1, 2]


async def test_a_fork_at_turn_zero_starts_empty(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=0)
    assert (await store.start_turn(fork.id, "fresh")).position == 1
    assert await store.vars_as_of(fork.id) == {}


async def test_vars_as_of_follows_the_chain_and_the_turn(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=2)
    await add_turn(store, fork.id, "fork writes", variables={"x": (3, "30")})

    assert _values(await store.vars_as_of(parent_id)) == {"y": (1, "10"), "x": (3, "3")}
    assert _values(await store.vars_as_of(parent_id, 1)) == {"x": (1, "1"), "y": (1, "10")}
    assert _values(await store.vars_as_of(parent_id, include_deleted=True)) == {
        "y": (1, "10"),
        "x": (3, "3"),
        "z": (2, None),
    }
    assert _values(await store.vars_as_of(fork.id, 2)) == {"y": (1, "10"), "x": (2, "2"),
                                                           "z": (1, "5")}  # fmt: skip
    assert _values(await store.vars_as_of(fork.id)) == {"y": (1, "10"), "z": (1, "5"),
                                                        "x": (3, "30")}  # fmt: skip
    latest = (await store.vars_as_of(fork.id))["x"]
    assert (latest.conversation_id, latest.turn_position) == (fork.id, 3)


async def test_forks_of_forks_see_each_ancestor_only_up_to_its_fork_point(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=2)
    await add_turn(store, fork.id, "fork writes", variables={"x": (3, "30")})
    grandchild = await store.create_conversation(channel="cli", parent_id=fork.id, fork_turn=3)
    early = await store.create_conversation(channel="cli", parent_id=fork.id, fork_turn=1)

    assert _values(await store.vars_as_of(grandchild.id))["x"] == (3, "30")
    assert [t.request for t in await store.turns(grandchild.id)] == ["one", "two", "fork writes"]
    assert _values(await store.vars_as_of(early.id)) == {"x": (1, "1"), "y": (1, "10")}
    assert (await store.start_turn(early.id, "q")).position == 2
    assert [v.version for v in await store.var_history(grandchild.id, "x")] == [1, 2, 3]


async def test_var_history_and_var_version_are_fork_aware(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=2)
    await add_turn(store, fork.id, "fork writes", variables={"x": (3, "30")})

    parent_history = await store.var_history(parent_id, "x")
    fork_history = await store.var_history(fork.id, "x")

    assert [(v.version, v.encoded, v.turn_position) for v in parent_history] == [
        (1, "1", 1),
        (2, "2", 2),
        (3, "3", 3),
    ]
    assert [(v.version, v.encoded) for v in fork_history] == [(1, "1"), (2, "2"), (3, "30")]
    assert (await store.var_version(fork.id, "x", 3)).encoded == "30"
    assert (await store.var_version(parent_id, "x", 3)).encoded == "3"
    assert (await store.var_version(fork.id, "x", 1)).conversation_id == parent_id
    assert [v.kind for v in await store.var_history(parent_id, "z")] == ["value", "deleted"]
    with pytest.raises(NotFound, match="'never'"):
        await store.var_history(fork.id, "never")
    with pytest.raises(NotFound, match="variable version"):
        await store.var_version(fork.id, "x", 9)
    with pytest.raises(NotFound):
        await store.var_history("nope", "x")


async def test_fork_reads_do_not_see_the_parents_later_work(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=1)

    recent = await store.recent_blocks(fork.id, 10)
    hits = await store.search("three", conversation_id=fork.id)
    parent_hits = await store.search("three", conversation_id=parent_id)

    assert {t for t, _, _ in recent} == {1}
    assert hits == []
    assert [h.turn_position for h in parent_hits] == [3]


@pytest.mark.parametrize(
    ("fork_turn", "error"),
    [(4, "turns 1..3"), (-1, "turns 1..3")],
)
async def test_a_fork_point_outside_the_parent_is_refused(
    store: Store, db_path: Path, fork_turn: int, error: str
) -> None:
    parent_id = await _parent_with_three_turns(store)
    with pytest.raises(StoreError, match=error):
        await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=fork_turn)
    assert count(db_path, "conversation") == 1


async def test_a_fork_needs_a_known_parent_and_a_turn(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.create_conversation(channel="cli", parent_id="nope", fork_turn=0)
    with pytest.raises(StoreError, match="both"):
        await store.create_conversation(channel="cli", parent_id="nope")


async def test_delete_cascades_and_collects_unshared_blobs(store: Store, db_path: Path) -> None:
    big = '"' + "b" * 8000 + '"'
    keep = await store.create_conversation(channel="cli")
    await add_turn(store, keep.id, "kept request", variables={"k": (1, "1")})
    doomed = await store.create_conversation(channel="cli")
    turn = await store.start_turn(doomed.id, "doomed request")
    iteration_id = await store.start_iteration(
        turn.id, 0, system_prompt="a prompt only the doomed one used", request_message="r",
        context_message="c",
    )  # fmt: skip
    await store.finish_iteration(
        iteration_id, iteration_write(result=big, variables={"v": (1, big)})
    )
    await add_iteration(store, turn.id, 1)  # shares the system prompt blob with `keep`
    assert count(db_path, "blob") == 3

    await store.delete_conversation(doomed.id)

    with raw(db_path) as conn:
        left = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("turn", "iteration", "block", "var_version", "search_doc", "search_fts")
        }
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    assert left == {"turn": 1, "iteration": 1, "block": 3, "var_version": 1,
                    "search_doc": 5, "search_fts": 5}  # fmt: skip
    assert count(db_path, "blob") == 1  # the shared system prompt survives
    assert integrity == "ok"
    assert await store.search("doomed") == []
    assert len(await store.search("kept")) == 1
    with pytest.raises(NotFound):
        await store.get_conversation(doomed.id)
    with pytest.raises(NotFound):
        await store.delete_conversation(doomed.id)


async def test_delete_refuses_a_conversation_with_forks_naming_them(
    store: Store, db_path: Path
) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=1)

    with pytest.raises(CoveError, match=f"has forks \\({fork.id}\\)"):
        await store.delete_conversation(parent_id)

    assert count(db_path, "turn") == 3
    await store.delete_conversation(fork.id)
    await store.delete_conversation(parent_id)
    assert (count(db_path, "conversation"), count(db_path, "blob")) == (0, 0)


async def test_forks_lists_direct_forks_by_fork_turn_then_age(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    other = await store.create_conversation(channel="cli", title="unrelated")
    late = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=2)
    first = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=0)
    again = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=2)
    await store.start_turn(first.id, "another first turn")
    grandchild = await store.create_conversation(channel="cli", parent_id=late.id, fork_turn=2)

    found = await store.forks(parent_id)

    assert [(f.id, f.fork_turn) for f in found] == [(first.id, 0), (late.id, 2), (again.id, 2)]
    assert all(f.parent_id == parent_id for f in found)
    assert (found[0].turn_count, found[0].first_request) == (1, "another first turn")
    assert [f.id for f in await store.forks(late.id)] == [grandchild.id]
    assert await store.forks(other.id) == []
    assert await store.forks(grandchild.id) == []


async def test_forks_of_an_owner_and_of_an_unknown_conversation(store: Store) -> None:
    parent = await store.create_conversation(channel="web", owner="web:alice")
    await add_turn(store, parent.id, "one")
    mine = await store.create_conversation(
        channel="web", parent_id=parent.id, fork_turn=1, owner="web:alice"
    )
    await store.create_conversation(channel="web", parent_id=parent.id, fork_turn=1, owner="bob")

    assert [f.id for f in await store.forks(parent.id, owner="web:alice")] == [mine.id]
    assert len(await store.forks(parent.id)) == 2
    with pytest.raises(NotFound):
        await store.forks("no-such-conversation")


async def test_a_fork_tree_is_read_whole_from_any_of_its_conversations(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    retried = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=1)
    await store.start_turn(retried.id, "two, again")
    deeper = await store.create_conversation(channel="cli", parent_id=retried.id, fork_turn=2)
    deepest = await store.create_conversation(channel="cli", parent_id=deeper.id, fork_turn=0)
    sibling = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=3)
    unrelated = await store.create_conversation(channel="cli", title="unrelated")
    other_fork = await store.create_conversation(channel="cli", parent_id=unrelated.id, fork_turn=0)
    everyone = [parent_id, retried.id, deeper.id, deepest.id, sibling.id]

    for member in everyone:  # the same tree, oldest first, from the root or any fork
        found = await store.fork_tree(member)
        assert [f.id for f in found] == everyone
    tree = {f.id: f for f in await store.fork_tree(deepest.id)}
    assert (tree[retried.id].parent_id, tree[retried.id].fork_turn) == (parent_id, 1)
    assert (tree[retried.id].turn_count, tree[retried.id].first_request) == (2, "two, again")
    assert [f.id for f in await store.fork_tree(other_fork.id)] == [unrelated.id, other_fork.id]
    alone = await store.create_conversation(channel="cli")
    assert [f.id for f in await store.fork_tree(alone.id)] == [alone.id]
    with pytest.raises(NotFound):
        await store.fork_tree("no-such-conversation")


async def test_a_fork_tree_of_an_owner(store: Store) -> None:
    root = await store.create_conversation(channel="web", owner="web:alice")
    mine = await store.create_conversation(
        channel="web", parent_id=root.id, fork_turn=0, owner="web:alice"
    )
    await store.create_conversation(channel="web", parent_id=root.id, fork_turn=0, owner="bob")

    assert [f.id for f in await store.fork_tree(mine.id, owner="web:alice")] == [root.id, mine.id]
    assert len(await store.fork_tree(mine.id)) == 3


async def test_turn_requests_reads_each_conversations_own_turns_at_once(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    fork = await store.create_conversation(channel="cli", parent_id=parent_id, fork_turn=1)
    await store.start_turn(fork.id, "two, otherwise")

    found = await store.turn_requests([(parent_id, 2), (parent_id, 3), (fork.id, 2), (fork.id, 1)])

    # The fork's turn 1 is its parent's: not the fork's own, so not found under it.
    assert found == {(parent_id, 2): "two", (parent_id, 3): "three", (fork.id, 2): "two, otherwise"}
    assert await store.turn_requests([]) == {}
    assert await store.turn_requests([("no-such-conversation", 1)]) == {}


async def test_turn_requests_reads_any_number_of_turns(store: Store) -> None:
    parent_id = await _parent_with_three_turns(store)
    many = [("no-such-conversation", n) for n in range(1500)] + [(parent_id, 3)]

    assert await store.turn_requests(many) == {(parent_id, 3): "three"}
