"""Leases between processes, and crash recovery when a database is opened."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cove.errors import Busy, NotFound
from cove.persistence.opener import Opener
from cove.persistence.store import Store
from tests.persistence.store_helpers import FakeClock, add_iteration


async def test_a_live_lease_keeps_other_owners_out(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    await store.acquire_lease(conversation.id, "web-1", ttl_s=30)

    with pytest.raises(Busy) as raised:
        await store.acquire_lease(conversation.id, "cli-2", ttl_s=30)

    assert raised.value.owner == "web-1" and "web-1" in str(raised.value)
    held = await store.get_conversation(conversation.id)
    assert held.lease_owner == "web-1"


async def test_the_same_owner_renews_by_acquiring_again(store: Store, clock: FakeClock) -> None:
    conversation = await store.create_conversation(channel="cli")
    await store.acquire_lease(conversation.id, "web-1", ttl_s=30)
    first = (await store.get_conversation(conversation.id)).lease_until
    clock.advance(10)

    await store.acquire_lease(conversation.id, "web-1", ttl_s=30)
    await store.renew_lease(conversation.id, "web-1", ttl_s=30)

    second = (await store.get_conversation(conversation.id)).lease_until
    assert first is not None and second is not None and second > first + 10


async def test_an_expired_lease_is_taken_over_and_its_turn_interrupted(
    store: Store, clock: FakeClock
) -> None:
    conversation = await store.create_conversation(channel="cli")
    await store.acquire_lease(conversation.id, "dead-process", ttl_s=30)
    turn = await store.start_turn(conversation.id, "q")
    committed = await add_iteration(store, turn.id, 0)
    running = await store.start_iteration(
        turn.id, 1, system_prompt="s", request_message="r", context_message="c"
    )
    clock.advance(31)

    await store.acquire_lease(conversation.id, "new-process", ttl_s=30)

    after = await store.get_turn(turn.id)
    iterations = (await store.transcript(conversation.id)).turns[0].iterations
    assert after.status == "interrupted" and after.error is not None
    assert [(i.id, i.status, len(i.blocks)) for i in iterations] == [
        (committed, "ok", 3),
        (running, "interrupted", 0),
    ]
    with pytest.raises(Busy, match="lost"):
        await store.renew_lease(conversation.id, "dead-process", ttl_s=30)


async def test_release_frees_the_lease_only_for_its_owner(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    await store.acquire_lease(conversation.id, "a", ttl_s=30)

    await store.release_lease(conversation.id, "b")  # not b's: nothing happens
    with pytest.raises(Busy):
        await store.acquire_lease(conversation.id, "b", ttl_s=30)
    await store.release_lease(conversation.id, "a")
    await store.acquire_lease(conversation.id, "b", ttl_s=30)
    await store.release_lease("unknown", "b")

    assert (await store.get_conversation(conversation.id)).lease_owner == "b"
    with pytest.raises(Busy, match="now held by b"):
        await store.renew_lease(conversation.id, "a", ttl_s=30)


async def test_leases_on_unknown_conversations_are_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.acquire_lease("nope", "a", ttl_s=30)
    with pytest.raises(NotFound):
        await store.renew_lease("nope", "a", ttl_s=30)


async def test_opening_interrupts_turns_nobody_holds_and_keeps_committed_work(
    open_store: Callable[[], Opener[Store]],
) -> None:
    async with open_store() as store:
        conversation = await store.create_conversation(channel="cli")
        turn = await store.start_turn(conversation.id, "q")
        committed = await add_iteration(store, turn.id, 0)
        await store.start_iteration(
            turn.id, 1, system_prompt="s", request_message="r", context_message="c"
        )
    # The process "died" with the turn running and no lease: the next open cleans up.
    async with open_store() as store:
        after = await store.get_turn(turn.id)
        iterations = (await store.transcript(conversation.id)).turns[0].iterations
        assert after.status == "interrupted" and after.finished_at is not None
        assert [(i.status, len(i.blocks)) for i in iterations] == [("ok", 3), ("interrupted", 0)]
        assert iterations[0].id == committed


async def test_opening_leaves_turns_under_a_live_lease_alone(
    open_store: Callable[[], Opener[Store]], clock: FakeClock
) -> None:
    async with open_store() as first:
        conversation = await first.create_conversation(channel="cli")
        await first.acquire_lease(conversation.id, "first", ttl_s=30)
        turn = await first.start_turn(conversation.id, "q")

        async with open_store() as second:  # another process opening the same file
            assert (await second.get_turn(turn.id)).status == "running"
            with pytest.raises(Busy):
                await second.acquire_lease(conversation.id, "second", ttl_s=30)

        await add_iteration(first, turn.id, 0)
        clock.advance(31)
        async with open_store() as third:  # the lease has now expired
            assert (await third.get_turn(turn.id)).status == "interrupted"
        with pytest.raises(Busy, match="no longer running"):
            await add_iteration(first, turn.id, 1)


async def test_reaping_frees_leases_of_dead_owners_and_interrupts_their_turns(
    store: Store,
) -> None:
    dead = await store.create_conversation(channel="cli")
    alive = await store.create_conversation(channel="cli")
    await store.acquire_lease(dead.id, "host:1:gone", ttl_s=30)
    await store.acquire_lease(alive.id, "host:2:here", ttl_s=30)
    dead_turn = await store.start_turn(dead.id, "q")
    alive_turn = await store.start_turn(alive.id, "q")

    reaped = await store.reap_dead_leases(lambda owner: owner.endswith("gone"))

    assert reaped == 1
    assert (await store.get_conversation(dead.id)).lease_owner is None
    assert (await store.get_turn(dead_turn.id)).status == "interrupted"
    assert (await store.get_conversation(alive.id)).lease_owner == "host:2:here"
    assert (await store.get_turn(alive_turn.id)).status == "running"
