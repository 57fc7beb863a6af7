"""Deliveries taken once (``persistence/deliveries.py``), on both backends. Two stores on one
database stand for two nodes that both received one update."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from cove.errors import CoveError
from cove.persistence.database import Transactions
from cove.persistence.opener import Opener
from cove.persistence.store import Store
from tests.persistence.store_helpers import FakeClock

DAY = 24 * 3600.0


async def keys(store: Store, table: str) -> list[str]:
    """The keys a table holds, read in a unit of its own."""

    async def read(on: Transactions) -> list[str]:
        async with on.reading() as db:
            return [str(row[0]) for row in await db.rows(f"SELECT key FROM {table} ORDER BY key")]

    return await store._db.run(read)


async def test_only_the_first_delivery_of_a_name_is_taken(store: Store) -> None:
    assert await store.first_delivery("telegram:1:100", DAY)
    assert not await store.first_delivery("telegram:1:100", DAY)
    assert await store.first_delivery("telegram:1:101", DAY)
    assert await store.first_delivery("telegram:2:100", DAY)  # another bot's update


async def test_two_stores_at_once_never_both_take_one_delivery(
    store: Store, open_store: Callable[[], Opener[Store]]
) -> None:
    async with open_store() as second:
        takers = [store, second] * 10
        taken = await asyncio.gather(
            *(taker.first_delivery(f"k:{i // 2}", DAY) for i, taker in enumerate(takers))
        )
    assert [taken[i] or taken[i + 1] for i in range(0, 20, 2)] == [True] * 10
    assert sum(taken) == 10


async def test_names_and_idle_send_slots_are_forgotten_after_the_window(
    store: Store, clock: FakeClock
) -> None:
    assert await store.first_delivery("old", DAY)
    await store.take_send_slot([("chat:idle", 1.0)], horizon_s=10)
    clock.advance(DAY + 5)
    await store.take_send_slot([("chat:busy", 1.0)], horizon_s=10)
    assert await store.first_delivery("new", DAY)  # and, as it records, the old are deleted
    names = await keys(store, "delivery")
    slots = await keys(store, "send_slot")
    assert names == ["new"]
    assert slots == ["chat:busy"]
    assert await store.first_delivery("old", DAY)  # past the window, a name is new again


async def test_a_nameless_delivery_is_refused(store: Store) -> None:
    with pytest.raises(CoveError, match="name"):
        await store.first_delivery("", DAY)
    with pytest.raises(CoveError, match="non-negative"):
        await store.first_delivery("k", -1)
