"""Followers woken only when their own conversation changed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cove.conversation.watch.wakes import ChangeWakes
from cove.persistence.store import Store


async def test_a_commit_wakes_the_followers_of_its_conversation_only(tmp_path: Path) -> None:
    async with Store.open(str(tmp_path / "cove.db")) as store:
        first = await store.create_conversation(channel="test")
        second = await store.create_conversation(channel="test")
        markers = await store.change_markers([first.id, second.id])
        wakes = ChangeWakes(store, store.commits)
        woken = asyncio.create_task(wakes.changed(first.id, markers[first.id], 60))
        untouched = asyncio.create_task(wakes.changed(second.id, markers[second.id], 60))
        await asyncio.sleep(0)  # both wait
        await store.set_title(first.id, "renamed")
        await asyncio.wait_for(woken, 30)
        for _ in range(5):  # a waiter woken by the same read would have returned by now
            await asyncio.sleep(0)
        # The watch read both markers after that commit: the other follower slept through it.
        assert not untouched.done()
        untouched_known = asyncio.create_task(wakes.changed(second.id, None, 60))
        await asyncio.wait_for(untouched_known, 30)  # a marker it does not know: at once
        assert not untouched.done()
        await wakes.aclose()
        await asyncio.wait_for(untouched, 5)  # closing wakes every waiter


async def test_a_waiter_wakes_after_its_timeout_without_a_commit(tmp_path: Path) -> None:
    async with Store.open(str(tmp_path / "cove.db")) as store:
        conversation = await store.create_conversation(channel="test")
        known = (await store.change_markers([conversation.id]))[conversation.id]
        wakes = ChangeWakes(store, store.commits)
        await asyncio.wait_for(wakes.changed(conversation.id, known, 0.05), 30)
        await wakes.aclose()
