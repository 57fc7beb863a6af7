"""The live-environment cache keeps its bound under contention and never opens one twice."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from typing import Any

import pytest

from cove.conversation.live import LiveCache


class Counter:
    """Counts environments alive at once, through the cache's opener seam."""

    def __init__(self) -> None:
        self.alive = 0
        self.peak = 0
        self.opened: list[str] = []
        self.failure: Exception | None = None  # raised by the next opens while set

    async def open(self, conversation_id: str) -> Any:
        if self.failure is not None:
            raise self.failure
        self.alive += 1
        self.peak = max(self.peak, self.alive)
        self.opened.append(conversation_id)
        await asyncio.sleep(random.uniform(0.001, 0.01))
        counter = self

        class Env:
            async def aclose(self) -> None:
                await asyncio.sleep(0.002)
                counter.alive -= 1

        return Env()


async def test_bound_holds_while_many_conversations_contend() -> None:
    counter = Counter()
    cache = LiveCache(4, counter.open)

    async def converse(cid: str) -> None:
        for _ in range(3):
            async with cache.use(cid):
                await asyncio.sleep(0.005)

    await asyncio.gather(*(converse(f"c{i}") for i in range(50)))
    assert counter.peak <= 4
    assert cache.peak <= 4
    await cache.aclose()
    assert counter.alive == 0


async def test_concurrent_senders_share_one_environment() -> None:
    counter = Counter()
    cache = LiveCache(4, counter.open)

    async def hold() -> None:
        async with cache.use("same"):
            await asyncio.sleep(0.01)

    await asyncio.gather(*(hold() for _ in range(10)))
    assert counter.opened == ["same"]
    await cache.aclose()


async def test_a_failed_open_frees_its_slot() -> None:
    async def broken(conversation_id: str) -> Any:
        raise RuntimeError("no worker")

    cache = LiveCache(1, broken)
    for _ in range(3):
        try:
            async with cache.use("x"):
                pass
        except RuntimeError:
            pass
    assert len(cache) == 0


class SlowClose:
    """Environments whose close waits until the test lets it finish."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()  # set when a close has begun
        self.finish = asyncio.Event()  # the test sets it to let the close end
        self.opened: list[str] = []
        self.closed: list[str] = []

    async def open(self, conversation_id: str) -> Any:
        self.opened.append(conversation_id)
        owner = self

        class Env:
            async def aclose(self) -> None:
                owner.closing.set()
                await owner.finish.wait()
                owner.closed.append(conversation_id)

        return Env()


async def test_a_slow_close_of_an_evicted_environment_blocks_no_other_conversation() -> None:
    envs = SlowClose()
    cache = LiveCache(2, envs.open)
    async with cache.use("old"):
        pass
    async with cache.use("busy"):
        pass
    # "new" evicts "old" (the idle, least recently used) and waits on its close.
    newcomer = asyncio.create_task(_hold(cache, "new"))
    async with asyncio.timeout(10):
        await envs.closing.wait()
        async with cache.use("busy") as entry:  # not held up by the close in progress
            assert entry.conversation_id == "busy"
        assert envs.opened == ["old", "busy"]  # "new" opens only once "old" has closed
        envs.finish.set()
        await newcomer
    assert envs.closed == ["old"]
    assert envs.opened == ["old", "busy", "new"]
    assert len(cache) == 2
    await cache.aclose()


async def test_a_conversation_whose_environment_is_closing_waits_to_open_a_new_one() -> None:
    envs = SlowClose()
    log: list[str] = []
    cache = LiveCache(4, lambda cid: _logged(envs.open(cid), log, cid))
    async with cache.use("a"):
        pass
    dropping = asyncio.create_task(cache.drop("a"))
    async with asyncio.timeout(10):
        await envs.closing.wait()
        reopen = asyncio.create_task(_hold(cache, "a"))
        for _ in range(20):  # let the reopen run as far as it can (no I/O: deterministic)
            await asyncio.sleep(0)
        log.append("closed")
        envs.finish.set()
        await dropping
        await reopen
    assert log == ["open a", "closed", "open a"]
    await cache.aclose()


async def _logged(opening: Awaitable[Any], log: list[str], conversation_id: str) -> Any:
    log.append(f"open {conversation_id}")
    return await opening


async def _hold(cache: LiveCache, conversation_id: str) -> None:
    async with cache.use(conversation_id):
        pass


async def test_turn_queue_is_fifo_and_survives_a_cancelled_waiter() -> None:
    from cove.conversation.turn_queue import TurnQueue

    queue = TurnQueue()
    order: list[str] = []
    first_runs, first_may_end = asyncio.Event(), asyncio.Event()

    async def turn(name: str) -> None:
        ticket = queue.join()
        try:
            await ticket.wait()
            order.append(name)
            if name == "first":
                first_runs.set()
                await first_may_end.wait()
        finally:
            queue.leave(ticket)

    first = asyncio.create_task(turn("first"))
    doomed = asyncio.create_task(turn("doomed"))
    last = asyncio.create_task(turn("last"))
    await first_runs.wait()  # the other two joined the queue right after the first
    doomed.cancel()
    first_may_end.set()
    await asyncio.gather(first, last)
    assert order == ["first", "last"]
    assert not queue.busy


async def test_reopen_replaces_the_environment_in_use_and_a_failed_one_leaves_the_cache() -> None:
    counter = Counter()
    cache = LiveCache(2, counter.open)
    async with cache.use("c") as entry:
        first = entry.env
        await cache.reopen(entry)
        assert entry.env is not first and counter.alive == 1  # the old one is closed
    assert cache.get("c") is entry

    counter.failure = RuntimeError("the worker could not start")
    async with cache.use("c") as entry:
        with pytest.raises(RuntimeError, match="could not start"):
            await cache.reopen(entry)
    assert cache.get("c") is None and counter.alive == 0  # the next use opens it anew
    counter.failure = None
    async with cache.use("c") as entry:
        assert counter.alive == 1
    await cache.aclose()


async def test_over_the_memory_budget_the_coldest_idle_environments_close() -> None:
    counter = Counter()
    sizes = {"a": 100, "b": 100, "c": 100, "big": 400}

    async def open_named(cid: str) -> Any:
        env = await counter.open(cid)
        env.cid = cid
        return env

    cache = LiveCache(10, open_named, memory_budget=250, measure=lambda env: sizes[env.cid])
    for cid in ("a", "b"):
        async with cache.use(cid):
            pass
    assert [e.conversation_id for e in cache.entries()] == ["a", "b"] and cache.memory() == 200
    # "a" in use (so the most recent), then "c": 300 > 250, but "a" is in use and "c" was
    # just used, so "b", the coldest, closes.
    async with cache.use("a"), cache.use("c"):
        pass
    await asyncio.sleep(0.05)  # background closes
    assert [e.conversation_id for e in cache.entries()] == ["a", "c"]
    assert cache.evicted_for_memory == 1 and counter.alive == 2
    async with cache.use("big"):
        pass  # alone over the budget: it stays, every idle other closes
    await asyncio.sleep(0.05)
    assert [e.conversation_id for e in cache.entries()] == ["big"] and counter.alive == 1
    await cache.aclose()
    assert counter.alive == 0


async def test_a_workers_memory_is_measured_again_only_after_the_interval() -> None:
    counter = Counter()
    measured: list[str] = []

    async def open_named(cid: str) -> Any:
        env = await counter.open(cid)
        env.cid = cid
        return env

    def measure(env: Any) -> int:
        measured.append(env.cid)
        return 100

    cache = LiveCache(10, open_named, memory_budget=1000, measure=measure, measure_every_s=0.2)
    for _ in range(3):
        async with cache.use("a"):
            pass
    assert measured == ["a"] and cache.memory() == 100  # its first use's end, then not again
    await asyncio.sleep(0.25)
    async with cache.use("a") as entry:
        pass
    assert measured == ["a", "a"]
    await cache.reopen(entry)  # a new worker: measured when the next use ends
    async with cache.use("a"):
        pass
    assert measured == ["a", "a", "a"]
    await cache.aclose()
