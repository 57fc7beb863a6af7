"""Moving a conversation's database to the other backend and back (``cove migrate``): the same
history arrives, and a replay after the move reproduces every turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.config import Settings
from cove.conversation import Conversations, scripted_factory
from cove.conversation.service.operations import move_database
from cove.errors import CoveError
from cove.events import ReplayFinished, ReplayTurnChecked
from cove.persistence.postgres.url import is_postgres
from tests.conversation.test_replay import record, replay
from tests.postgres_server import PostgresServer


def _other(settings: Settings, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    """A new database of the backend the test's database is not on."""
    if is_postgres(settings.store.database):
        return str(tmp_path / f"{name}.db")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.database()


async def _inspect(settings: Settings, conversation_id: str) -> object:
    async with await Conversations.open(settings, llm_factory=scripted_factory([])) as convs:
        return await convs.inspect(conversation_id)


async def _replays_every_turn(settings: Settings, conversation_id: str) -> None:
    events = await replay(settings, conversation_id)
    turns = [e for e in events if isinstance(e, ReplayTurnChecked)]
    assert [t.position for t in turns] == [1, 2]
    assert all(t.mismatches == () and t.matched == t.blocks for t in turns), turns
    assert isinstance(events[-1], ReplayFinished) and events[-1].ok


async def test_a_move_to_the_other_backend_and_back_keeps_every_turn(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings, cid = await record(tmp_path)
    recorded = await _inspect(settings, cid)

    there = settings.replace(db_path=_other(settings, tmp_path, "there", request))
    report = await move_database(settings, there.store.database)
    assert (report.conversations, report.rows["turn"]) == (1, 2)
    assert await _inspect(there, cid) == recorded
    await _replays_every_turn(there, cid)

    back = there.replace(db_path=_other(there, tmp_path, "back", request))  # the first kind
    await move_database(there, back.store.database)
    assert await _inspect(back, cid) == recorded
    await _replays_every_turn(back, cid)


async def test_a_move_into_a_database_that_holds_conversations_is_refused(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings, cid = await record(tmp_path)
    there = settings.replace(db_path=_other(settings, tmp_path, "there", request))
    await move_database(settings, there.store.database)
    with pytest.raises(CoveError, match="already holds 1 conversations"):
        await move_database(settings, there.store.database)
    assert await _inspect(there, cid) == await _inspect(settings, cid)


def test_every_table_that_holds_a_conversation_is_moved() -> None:
    # A migration adding a table must say here whether a move copies it.
    from cove.persistence.transfer import TABLES as MOVED
    from tests.persistence.test_migrations import TABLES as SCHEMA

    rebuilt_or_transient = {
        "schema_migrations",  # the target's own
        "search_doc",  # rebuilt on the target from the moved turns
        "send_slot",  # a pace of the live processes
        "delivery",  # a sender's redelivery window
    }
    in_schema = {t for t in SCHEMA if not t.startswith("search_fts")} - rebuilt_or_transient
    assert {table for table, _ in MOVED} == in_schema
