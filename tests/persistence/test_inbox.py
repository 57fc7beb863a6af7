"""The inbox (``persistence/inbox.py``), on both backends: a delivery kept until handled, held
by one process at a time, taken over when its holder's claim ends, and run once even then.
Two stores on one database stand for two nodes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from cove.errors import Busy, CoveError
from cove.persistence.fence import Fence, fenced
from cove.persistence.opener import Opener
from cove.persistence.store import Store
from tests.persistence.store_helpers import FakeClock, rows_in

DAY = 24 * 3600.0
CLAIM = 30.0
BOT = "telegram:1"


async def keep(
    store: Store, seq: int, holder: str | None = "a", lane: str | None = "chat:7"
) -> bool:
    """Receive update ``seq`` of chat 7 (its body names it), held by ``holder``."""
    return await store.receive_delivery(
        f"{BOT}:{seq}",
        sender=BOT,
        lane=lane,
        seq=seq,
        body=f'{{"update_id": {seq}}}',
        holder=holder,
        claim_s=CLAIM,
        keep_s=DAY,
    )


async def test_a_delivery_is_kept_once_with_its_body_and_its_name(store: Store) -> None:
    assert await keep(store, 1)
    assert not await keep(store, 1)  # a repeat: dropped, nothing more kept
    assert not await store.first_delivery(f"{BOT}:1", DAY)  # its name was recorded with it
    [entry] = await store.deliveries_ahead(BOT, "chat:7", 2)
    assert (entry.key, entry.seq, entry.body, entry.holder) == (
        f"{BOT}:1",
        1,
        '{"update_id": 1}',
        "a",
    )
    assert not entry.started
    assert await rows_in(store, "inbox") == 1


async def test_a_claim_is_taken_over_only_once_it_ends_and_renewing_keeps_it(
    store: Store, clock: FakeClock
) -> None:
    await keep(store, 1)
    assert await store.take_deliveries(BOT, "b", CLAIM) == []  # a's claim is live
    clock.advance(CLAIM / 2)
    assert await store.renew_deliveries(BOT, "a", CLAIM, [f"{BOT}:1"]) == 1
    clock.advance(CLAIM * 3 / 4)
    assert await store.take_deliveries(BOT, "b", CLAIM) == []  # renewed: still a's
    assert (await store.inbox_claims(BOT)).free == 0
    clock.advance(CLAIM)
    assert (await store.inbox_claims(BOT)).free == 1  # a's claim ended
    [taken] = await store.take_deliveries(BOT, "b", CLAIM)
    assert (taken.key, taken.holder) == (f"{BOT}:1", "b")
    assert await store.renew_deliveries(BOT, "a", CLAIM, [f"{BOT}:1"]) == 0  # a lost it
    assert not await store.finish_delivery(f"{BOT}:1", "a")  # and cannot finish it
    assert await store.finish_delivery(f"{BOT}:1", "b")
    assert await rows_in(store, "inbox") == 0


async def test_a_dead_holders_and_a_released_claim_are_taken_at_once(store: Store) -> None:
    await keep(store, 1, holder="dead")
    await keep(store, 2, holder="a")
    await keep(store, 3, holder=None)  # received while its node was stopping
    claims = await store.inbox_claims(BOT)
    assert (claims.holders, claims.free) == (("a", "dead"), 1)
    taken = await store.take_deliveries(BOT, "b", CLAIM, ["dead"])
    assert [entry.seq for entry in taken] == [1, 3]
    assert await store.release_deliveries(BOT, "a") == 1
    [released] = await store.take_deliveries(BOT, "b", CLAIM)
    assert released.seq == 2


async def test_two_stores_at_once_never_both_take_one_delivery(
    store: Store, open_store: Callable[[], Opener[Store]], clock: FakeClock
) -> None:
    for seq in range(20):
        await keep(store, seq, holder="dead", lane=f"chat:{seq % 3}")
    clock.advance(CLAIM + 1)
    async with open_store() as second:
        taken = await asyncio.gather(
            *(s.take_deliveries(BOT, name, CLAIM) for s, name in [(store, "a"), (second, "b")] * 3)
        )
    keys = [entry.key for batch in taken for entry in batch]
    assert sorted(keys) == sorted(f"{BOT}:{seq}" for seq in range(20))  # each exactly once


async def test_a_command_starts_once_even_after_a_takeover(store: Store, clock: FakeClock) -> None:
    await keep(store, 1)
    assert await store.start_delivery(f"{BOT}:1", "b") == "taken"  # not b's
    assert await store.start_delivery(f"{BOT}:1", "a") == "start"
    assert await store.start_delivery(f"{BOT}:1", "a") == "ran"
    clock.advance(CLAIM + 1)  # a died while it ran
    [taken] = await store.take_deliveries(BOT, "b", CLAIM)
    assert taken.started
    assert await store.start_delivery(f"{BOT}:1", "b") == "ran"  # never a second run
    await store.finish_delivery(f"{BOT}:1", "b")
    assert await store.start_delivery(f"{BOT}:1", "b") == "taken"  # gone


async def test_a_delivered_turn_found_recorded_after_a_takeover_is_not_started_again(
    store: Store, clock: FakeClock
) -> None:
    conversation = await store.create_conversation(channel="telegram")
    await keep(store, 1)
    await keep(store, 2)
    fence = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", CLAIM))
    with fenced(fence):
        assert await store.start_delivered_turn(f"{BOT}:1", "b", conversation.id) == "taken"
        assert await store.start_delivered_turn(f"{BOT}:1", "a", conversation.id) == "start"
        await store.start_turn(conversation.id, "hi", delivery=f"{BOT}:1")  # then a dies
        # Its second message was marked, but a died before recording its turn.
        assert await store.start_delivered_turn(f"{BOT}:2", "a", conversation.id) == "start"
    clock.advance(CLAIM + 1)
    taken = await store.take_deliveries(BOT, "b", CLAIM)
    assert [entry.seq for entry in taken] == [1, 2] and all(entry.started for entry in taken)
    fence = Fence(conversation.id, "b", await store.acquire_lease(conversation.id, "b", CLAIM))
    with fenced(fence):
        assert await store.start_delivered_turn(f"{BOT}:1", "b", conversation.id) == "ran"
        # Position 2 holds no turn: the second message's turn never started, so it starts now.
        assert await store.start_delivered_turn(f"{BOT}:2", "b", conversation.id) == "start"


@pytest.mark.parametrize("asked", ["something else", "hi"])
async def test_another_turn_at_the_recorded_position_is_not_the_deliverys(
    store: Store, clock: FakeClock, asked: str
) -> None:
    conversation = await store.create_conversation(channel="telegram")
    await keep(store, 1)
    fence = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", CLAIM))
    with fenced(fence):
        assert await store.start_delivered_turn(f"{BOT}:1", "a", conversation.id) == "start"
    clock.advance(CLAIM + 1)  # a died before its turn was recorded
    await store.take_deliveries(BOT, "b", CLAIM)
    fence = Fence(conversation.id, "c", await store.acquire_lease(conversation.id, "c", CLAIM))
    with fenced(fence):  # another channel asks at that position meanwhile, even the same words
        await store.start_turn(conversation.id, asked)
    clock.advance(CLAIM + 1)
    fence = Fence(conversation.id, "b", await store.acquire_lease(conversation.id, "b", CLAIM))
    with fenced(fence):  # still the delivery's own turn to run
        assert await store.start_delivered_turn(f"{BOT}:1", "b", conversation.id) == "start"
        turn = await store.start_turn(conversation.id, "hi")
    assert turn.position == 2


async def test_a_delivered_turn_is_refused_under_a_stale_lease(
    store: Store, clock: FakeClock
) -> None:
    conversation = await store.create_conversation(channel="telegram")
    await keep(store, 1)
    stale = Fence(conversation.id, "a", await store.acquire_lease(conversation.id, "a", CLAIM))
    clock.advance(CLAIM + 1)
    await store.acquire_lease(conversation.id, "b", CLAIM)  # a stalled; b took the lease
    with fenced(stale), pytest.raises(Busy):
        await store.start_delivered_turn(f"{BOT}:1", "a", conversation.id)
    [entry] = await store.deliveries_ahead(BOT, "chat:7", 2)
    assert not entry.started  # nothing was written


async def test_deliveries_ahead_lists_a_lanes_unfinished_deliveries_in_order(
    store: Store,
) -> None:
    for seq in (5, 3, 4):
        await keep(store, seq)
    await keep(store, 1, lane="chat:8")
    await keep(store, 2, lane=None)
    await store.finish_delivery(f"{BOT}:4", "a")
    ahead = await store.deliveries_ahead(BOT, "chat:7", 5)
    assert [entry.seq for entry in ahead] == [3]
    assert [entry.seq for entry in await store.deliveries_ahead(BOT, "chat:7", 3)] == []


async def test_a_delivery_without_a_sender_or_name_is_refused(store: Store) -> None:
    with pytest.raises(CoveError, match="sender"):
        await store.receive_delivery(
            "k", sender="", lane=None, seq=1, body="{}", holder="a", claim_s=1, keep_s=DAY
        )
    with pytest.raises(CoveError, match="name"):
        await store.receive_delivery(
            "", sender=BOT, lane=None, seq=1, body="{}", holder="a", claim_s=1, keep_s=DAY
        )
    assert await rows_in(store, "inbox") == 0
