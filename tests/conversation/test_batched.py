"""``Batched``: the keys asked for in one pass of the event loop are read together."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from cove.conversation.batched import Batched
from cove.errors import NotFound, StoreError


class Reads:
    """A ``read_many`` that records the keys of each read and knows the keys in ``known``."""

    def __init__(self, known: dict[str, int]) -> None:
        self.known = known
        self.reads: list[list[str]] = []
        self.failure: Exception | None = None

    async def __call__(self, keys: Sequence[str]) -> dict[str, int]:
        self.reads.append(list(keys))
        await asyncio.sleep(0.01)
        if self.failure is not None:
            raise self.failure
        return {key: self.known[key] for key in keys if key in self.known}


async def test_keys_asked_for_together_are_read_once() -> None:
    reads = Reads({f"c{n}": n for n in range(20)})
    batched = Batched(reads, "conversation")
    values = await asyncio.gather(*(batched.get(f"c{n}") for n in range(20)), batched.get("c3"))
    assert values == [*range(20), 3]
    assert reads.reads == [[f"c{n}" for n in range(20)]]  # one read, each key once
    assert await batched.get("c5") == 5  # a later ask is a read of its own
    assert reads.reads[1:] == [["c5"]]


async def test_waiters_woken_by_one_event_share_a_read() -> None:
    # As followers woken by one commit: each resumes in the same pass of the loop.
    reads = Reads({"a": 1, "b": 2, "c": 3})
    batched = Batched(reads, "conversation")
    woken = asyncio.Event()

    async def follower(key: str) -> int:
        await woken.wait()
        return await batched.get(key)

    tasks = [asyncio.create_task(follower(key)) for key in "abc"]
    await asyncio.sleep(0.01)
    woken.set()
    assert await asyncio.gather(*tasks) == [1, 2, 3]
    assert reads.reads == [["a", "b", "c"]]


async def test_an_unknown_key_is_not_found_and_the_others_get_their_values() -> None:
    batched = Batched(Reads({"a": 1}), "conversation")
    found, missing = await asyncio.gather(
        batched.get("a"), batched.get("gone"), return_exceptions=True
    )
    assert found == 1
    assert isinstance(missing, NotFound) and missing.key == "gone"


async def test_a_failed_read_fails_every_waiter_and_the_next_read_runs() -> None:
    reads = Reads({"a": 1, "b": 2})
    reads.failure = StoreError("database is locked")
    batched = Batched(reads, "conversation")
    results = await asyncio.gather(batched.get("a"), batched.get("b"), return_exceptions=True)
    assert all(isinstance(r, StoreError) for r in results)
    reads.failure = None
    assert await batched.get("b") == 2


async def test_a_cancelled_waiter_leaves_the_others_their_answers() -> None:
    reads = Reads({"a": 1, "b": 2})
    batched = Batched(reads, "conversation")
    leaving = asyncio.create_task(batched.get("a"))
    staying = asyncio.create_task(batched.get("b"))
    await asyncio.sleep(0.001)  # the read has started
    leaving.cancel()
    assert await staying == 2
    with pytest.raises(asyncio.CancelledError):
        await leaving
