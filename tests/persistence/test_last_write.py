"""A unit's last write: a transaction of its own on PostgreSQL when it is also the unit's first
statement, and nothing written after it (both backends)."""

from __future__ import annotations

import pytest

from cove.errors import StoreError
from cove.persistence.database import Transactions
from cove.persistence.store import Store

SET_TITLE = "UPDATE conversation SET title = ? WHERE id = ?"


async def _title(store: Store, conversation_id: str) -> str | None:
    return (await store.get_conversation(conversation_id)).title


async def test_a_unit_may_read_after_its_last_write_but_not_write(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")
    seen: list[str] = []

    async def unit(db: Transactions) -> None:
        async with db.writing() as sql:
            await sql.run(SET_TITLE, ("first", conversation.id), last=True)
            seen.append(
                await sql.value("SELECT title FROM conversation WHERE id = ?", (conversation.id,))
            )
            await sql.run(SET_TITLE, ("second", conversation.id))

    with pytest.raises(StoreError, match="a unit wrote after its last write"):
        await store._db.run(unit)  # type: ignore[attr-defined]
    assert seen == ["first"]
    assert await _title(store, conversation.id) != "second"


async def test_a_last_write_after_other_statements_commits_with_them(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")

    async def unit(db: Transactions) -> None:
        async with db.writing() as sql:
            await sql.run(SET_TITLE, ("draft", conversation.id))
            await sql.run(SET_TITLE, ("kept", conversation.id), last=True)
            raise RuntimeError("the unit fails after its last write")

    with pytest.raises(RuntimeError):
        await store._db.run(unit)  # type: ignore[attr-defined]
    # Begun by the first statement, the transaction rolls back whole: neither write landed.
    assert await _title(store, conversation.id) is None


async def test_a_unit_of_one_last_write_that_fails_writes_nothing(store: Store) -> None:
    conversation = await store.create_conversation(channel="cli")

    async def unit(db: Transactions) -> None:
        async with db.writing() as sql:
            # Two rows of one statement: the second breaks the primary key, so neither lands.
            await sql.run(
                "INSERT INTO conversation (id, title, channel, created_at, updated_at)"
                " SELECT ?, 'twin', 'cli', 0, 0 UNION ALL SELECT ?, 'twin', 'cli', 0, 0",
                ("twin", "twin"),
                last=True,
            )

    with pytest.raises(store._db.errors):  # type: ignore[attr-defined]
        await store._db.run(unit)  # type: ignore[attr-defined]
    assert [c.id for c in await store.list_conversations()] == [conversation.id]
