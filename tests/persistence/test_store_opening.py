"""Opening a database: cove's tag, foreign and legacy databases, folders, read-only opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.errors import NotADatabase, StoreError
from cove.persistence.migrate import latest_version, migrations
from cove.persistence.opening import APPLICATION_ID
from cove.persistence.store import Store
from tests.persistence.store_helpers import file_bytes, file_names, raw, write_file


def make_schema_1_database(path: Path) -> str:
    """A database exactly as cove's first schema left it: untagged, version 1, one turn."""
    with raw(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        for statement in migrations()[0].statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (1, 'init', 0)")
        conn.execute(
            "INSERT INTO conversation (id, channel, title, created_at, updated_at)"
            " VALUES ('c0ffee', 'cli', 'old times', 1, 1)"
        )
        conn.execute(
            "INSERT INTO turn (conversation_id, position, request, status, started_at)"
            " VALUES ('c0ffee', 1, 'hello', 'done', 1)"
        )
        conn.commit()
    return "c0ffee"


def application_id(path: Path) -> int:
    with raw(path) as conn:
        return int(conn.execute("PRAGMA application_id").fetchone()[0])


async def test_a_new_database_is_tagged_as_cove(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "new.db") as store:
        assert store.created
    assert application_id(tmp_path / "new.db") == APPLICATION_ID
    async with Store.open(tmp_path / "new.db") as store:
        assert not store.created


async def test_an_empty_file_is_initialised(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    write_file(path, b"")
    async with Store.open(path) as store:
        await store.create_conversation(channel="cli")
    assert application_id(path) == APPLICATION_ID


async def test_a_database_of_today_s_first_schema_opens_and_is_tagged(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    conversation_id = make_schema_1_database(path)
    assert application_id(path) == 0
    async with Store.open(path) as store:
        assert store.schema_version == latest_version()
        assert (await store.get_conversation(conversation_id)).title == "old times"
        [turn] = await store.turns(conversation_id)
        assert turn.request == "hello"
    assert application_id(path) == APPLICATION_ID


@pytest.mark.parametrize("read_only", [False, True])
async def test_another_application_s_database_is_refused_untouched(
    tmp_path: Path, read_only: bool
) -> None:
    path = tmp_path / "notes.db"
    with raw(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('buy milk')")
        conn.commit()
    before = file_bytes(path)
    with pytest.raises(NotADatabase, match="another application"):
        await Store.open(path, read_only=read_only)
    assert file_bytes(path) == before
    assert file_names(tmp_path) == ["notes.db"]


async def test_a_tagged_database_of_another_application_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with raw(path) as conn:
        conn.execute("PRAGMA application_id = 42")
        conn.commit()
    before = file_bytes(path)
    with pytest.raises(NotADatabase, match="another application"):
        await Store.open(path)
    assert file_bytes(path) == before


async def test_a_folder_is_named_a_folder(tmp_path: Path) -> None:
    for read_only in (False, True):
        with pytest.raises(NotADatabase, match="is a directory"):
            await Store.open(tmp_path, read_only=read_only)


async def test_a_read_only_open_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "cove.db"
    async with Store.open(path, read_only=True) as store:
        assert await store.list_conversations() == []
        assert not store.created
    assert file_names(tmp_path) == []


async def test_a_read_only_open_writes_nothing_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    async with Store.open(path) as store:
        conversation = await store.create_conversation(channel="cli")
        await store.start_turn(conversation.id, "left running")  # recovery would interrupt it
    before = file_bytes(path)
    async with Store.open(path, read_only=True) as store:
        assert store.read_only
        [turn] = await store.turns(conversation.id)
        assert turn.status == "running"  # no crash recovery on a read-only open
        with pytest.raises(StoreError, match="readonly"):
            await store.set_title(conversation.id, "x")
    assert file_bytes(path) == before


async def test_a_read_only_open_upgrades_an_old_writable_schema_first(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    conversation_id = make_schema_1_database(path)
    async with Store.open(path, read_only=True) as store:
        assert store.read_only
        assert (await store.get_conversation(conversation_id)).title == "old times"
    async with Store.open(path, read_only=True) as store:
        assert store.schema_version == latest_version()
