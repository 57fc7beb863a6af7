"""Send slots (``persistence/pacing.py``): a pace that every store on one database keeps,
on both backends. Two stores on one database stand for two nodes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest

from cove.errors import CoveError
from cove.persistence.opener import Opener
from cove.persistence.store import Store
from tests.persistence.store_helpers import FakeClock

CHAT = ("chat:1", 1.0)
BOT = ("bot", 0.1)


async def test_one_keys_slots_come_an_interval_apart(store: Store, clock: FakeClock) -> None:
    slots = [await store.take_send_slot([CHAT], horizon_s=10) for _ in range(4)]
    assert all(slot.taken for slot in slots)
    assert slots[0].wait_s == 0
    gaps = [b.at - a.at for a, b in itertools.pairwise(slots)]
    assert gaps == pytest.approx([1.0, 1.0, 1.0])
    assert slots[3].wait_s == pytest.approx(3.0, abs=0.01)


async def test_a_slot_beyond_the_horizon_is_not_taken_and_says_when_to_ask_again(
    store: Store, clock: FakeClock
) -> None:
    first = await store.take_send_slot([CHAT], horizon_s=0.5)
    refused = await store.take_send_slot([CHAT], horizon_s=0.5)
    assert first.taken and not refused.taken
    assert refused.at == pytest.approx(first.at + 1.0 - 0.5, abs=0.01)
    clock.advance(refused.wait_s)
    again = await store.take_send_slot([CHAT], horizon_s=0.5)
    assert again.taken and again.at == pytest.approx(first.at + 1.0)


async def test_a_slot_keeps_every_keys_interval(store: Store, clock: FakeClock) -> None:
    other = ("chat:2", 1.0)
    bot = ("bot", 0.5)
    a = await store.take_send_slot([CHAT, bot], horizon_s=10)
    b = await store.take_send_slot([other, bot], horizon_s=10)  # another chat: the bot's pace
    c = await store.take_send_slot([CHAT, bot], horizon_s=10)  # the first chat's pace
    d = await store.take_send_slot([other, bot], horizon_s=10)
    assert b.at - a.at == pytest.approx(0.5, abs=0.01)
    assert c.at - a.at == pytest.approx(1.0, abs=0.01)
    # The bot's pace moved the second chat's slot past its own interval; its next keeps it.
    assert d.at - c.at == pytest.approx(0.5, abs=0.01) and d.at - b.at >= 1.0


async def test_two_stores_taking_at_once_never_share_a_slot(
    store: Store, open_store: Callable[[], Opener[Store]]
) -> None:
    async with open_store() as second:
        takers = [store, second] * 20
        slots = await asyncio.gather(
            *(taker.take_send_slot([BOT], horizon_s=100) for taker in takers)
        )
    times = sorted(slot.at for slot in slots)
    assert all(slot.taken for slot in slots)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.1 - 1e-6


async def test_a_dead_stores_slots_hold_others_back_no_longer_than_it_booked(
    open_store: Callable[[], Opener[Store]], clock: FakeClock
) -> None:
    async with open_store() as dying:
        booked = [await dying.take_send_slot([CHAT], horizon_s=2) for _ in range(5)]
    assert [slot.taken for slot in booked] == [True, True, True, False, False]
    async with open_store() as survivor:
        waiting = await survivor.take_send_slot([CHAT], horizon_s=2)
        assert not waiting.taken and waiting.wait_s <= 1.0 + 0.01
        clock.advance(3.0 + 0.01)  # past the last slot the dead store took, plus its interval
        free = await survivor.take_send_slot([CHAT], horizon_s=2)
        assert free.taken and free.wait_s == 0


async def test_a_negative_interval_is_refused_and_books_nothing(store: Store) -> None:
    with pytest.raises(CoveError, match="negative"):
        await store.take_send_slot([CHAT, ("bot", -1.0)], horizon_s=1)
    assert (await store.take_send_slot([CHAT], horizon_s=1)).wait_s == 0
