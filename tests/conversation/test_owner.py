"""Owners: a channel's principal sees only its own conversations; the local user sees all."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.conversation import Conversations, scripted_factory
from cove.errors import NotFound
from tests.scripted import reply, settings_for


async def test_owners_see_only_their_conversations(tmp_path: Path) -> None:
    factory = scripted_factory([reply([], "alice's answer"), reply([], "bob's answer")])
    async with Conversations.open(settings_for(tmp_path), llm_factory=factory) as convs:
        alice = await convs.create(channel="web", owner="web:alice")
        bob = await convs.create(channel="telegram", owner="tg:42")
        local = await convs.create()
        await convs.send(alice.id, "shared word", owner="web:alice").finished()
        await convs.send(bob.id, "shared word", owner="tg:42").finished()

        assert [c.id for c in await convs.list(owner="web:alice")] == [alice.id]
        assert {c.id for c in await convs.list()} == {alice.id, bob.id, local.id}
        assert (await convs.get(alice.id)).owner == "web:alice"

        # Another owner's conversation is not found, by full id or by prefix.
        for wanted in (bob.id, bob.id[:8], local.id):
            with pytest.raises(NotFound):
                await convs.get(wanted, owner="web:alice")
        with pytest.raises(NotFound):
            await convs.watch(bob.id, owner="web:alice").start()
        with pytest.raises(NotFound):
            await convs.send(bob.id, "intrude", owner="web:alice").finished()
        with pytest.raises(NotFound):
            await convs.inspect(bob.id, owner="web:alice")

        hits = await convs.search("shared", owner="web:alice")
        assert {h.conversation_id for h in hits} == {alice.id}
        assert {h.conversation_id for h in await convs.search("shared")} == {alice.id, bob.id}

        fork = await convs.fork(alice.id, 1)
        assert fork.owner == "web:alice"
        assert len(await convs._store.turns(bob.id)) == 1  # the intrusion never ran


async def test_a_prefix_shared_with_another_owner_is_not_ambiguous(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path), llm_factory=scripted_factory([])) as c:
        mine = await c.create(owner="a")
        # Ids are random hex: another owner's conversation starting with the same character
        # comes within 16 creations on average; 1,000 without one would be a broken id source.
        for _ in range(1000):
            clash = await c.create(owner="b")
            if clash.id[0] == mine.id[0]:
                break
        assert clash.id[0] == mine.id[0]
        assert (await c.get(mine.id[0], owner="a")).id == mine.id


async def test_the_list_watch_of_an_owner_hides_other_owners(tmp_path: Path) -> None:
    async with Conversations.open(settings_for(tmp_path), llm_factory=scripted_factory([])) as c:
        changes = await c.watch_list(owner="a").start()
        await c.create(owner="b")
        hidden = await c.create(owner="b")
        mine = await c.create(owner="a")
        seen = await anext(changes)
        await c.delete(hidden.id)
        await c.delete(mine.id)
        gone = await anext(changes)
        await changes.aclose()
    assert (seen.kind, seen.conversation_id) == ("created", mine.id)
    assert (gone.kind, gone.conversation_id) == ("deleted", mine.id)
