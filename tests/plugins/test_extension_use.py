"""The store's record of a conversation's extensions and of approvals (migration 0021), on
both backends."""

from __future__ import annotations

import pytest

from cove.errors import NotFound
from cove.persistence.extension_use import ApprovalRecord, ExtensionUse
from cove.persistence.store import Store


def decision(turn: int, iteration: int, seq: int, approved: bool = True) -> ApprovalRecord:
    return ApprovalRecord(
        turn_position=turn,
        iteration_position=iteration,
        block_position=0,
        seq=seq,
        extension="notes_add",
        function="notes_add",
        effect="write",
        arguments="'x'",
        approved=approved,
        reason="person",
        remember=not approved,
    )


async def test_a_conversations_extensions_policy_and_approvals_are_kept_and_go_with_it(
    database: str,
) -> None:
    async with Store.open(database) as store:
        conversation = await store.create_conversation(channel="cli")
        assert await store.conversation_extensions(conversation.id) is None
        await store.set_extension_use(conversation.id, ["core", "notes_add"], {"write": "ask"})
        await store.remember_rule(conversation.id, "notes_add", "deny")
        assert await store.conversation_extensions(conversation.id) == ExtensionUse(
            ("core", "notes_add"), {"notes_add": "deny", "write": "ask"}
        )
        for record in (decision(2, 0, 0), decision(1, 1, 1, False), decision(1, 1, 0)):
            await store.record_approval(conversation.id, record)
        await store.record_approval(conversation.id, decision(2, 0, 0, approved=False))  # kept
        kept = await store.approvals(conversation.id)
        assert [(a.turn_position, a.iteration_position, a.seq, a.approved) for a in kept] == [
            (1, 1, 0, True),
            (1, 1, 1, False),
            (2, 0, 0, True),
        ]
        assert kept[1].remember and kept[1].at > 0
        assert [a.seq for a in await store.approvals(conversation.id, 1)] == [0, 1]
        await store.delete_conversation(conversation.id)
        assert await store.approvals(conversation.id) == []
        assert await store.conversation_extensions(conversation.id) is None
        with pytest.raises(NotFound):
            await store.set_extension_use(conversation.id, ["core"], {})
        with pytest.raises(NotFound):
            await store.remember_rule(conversation.id, "x", "allow")
