"""Migrations: the exact schema of a fresh database, versioning, and files we must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from cove.errors import NotADatabase, SchemaTooNew, StoreError
from cove.persistence.migrate import latest_version, migrations, split_statements
from cove.persistence.opening import APPLICATION_ID
from cove.persistence.store import Store
from cove.results import TurnOutcome
from tests.persistence.store_helpers import count, file_bytes, file_names, raw, write_file

MIGRATIONS = Path(__file__).parents[2] / "cove" / "persistence" / "migrations"

TABLES = {
    "blob": ["hash", "data"],
    "conversation": [
        "id", "channel", "external_id", "title", "parent_id", "fork_turn", "workspace",
        "created_at", "updated_at", "lease_owner", "lease_until", "owner", "lease_epoch",
        "value_bytes", "history_mark",
    ],
    "turn": [
        "id", "conversation_id", "position", "request", "status", "answer", "confidence",
        "model", "tokens_in", "tokens_out", "cost_usd", "started_at", "finished_at", "error",
        "attachments", "model_options", "cost_known", "delivery",
    ],
    "iteration": [
        "id", "turn_id", "position", "status", "system_prompt_hash", "request_message",
        "context_message", "raw_reply", "thinking", "parse_error", "tokens_in", "tokens_out",
        "llm_ms", "duration_ms", "seed", "started_at", "planned_blocks", "cost_usd", "refusal",
        "model",
    ],
    "block": [
        "id", "iteration_id", "position", "code", "ok", "result_preview", "result_encoded",
        "result_blob", "stdout", "stderr", "error", "duration_ms", "timed_out", "seed", "clock",
        "figures",
    ],
    "block_figure": ["block_id", "position", "digest"],
    "var_version": [
        "id", "conversation_id", "name", "version", "block_id", "kind", "encoded",
        "encoded_blob", "type_name", "preview", "size", "created_at", "root_chunk", "digest",
        "thinned",
    ],
    "value_chunk": ["id", "hash", "data", "children"],
    "value_ref": ["chunk_id", "refs"],
    "subquery": [
        "id", "iteration_id", "block_position", "position", "prompt", "reply", "model",
        "tokens_in", "tokens_out", "cost_usd", "duration_ms", "error",
    ],
    "search_doc": ["id", "turn_id", "kind"],
    "steering": ["id", "iteration_id", "position", "text", "created_at"],
    "turn_note": [
        "id", "turn_id", "seq", "kind", "text", "restored", "lost", "created_at", "nudge_kind",
        "retry_attempt", "retry_budget",
    ],
    "cancel_request": ["turn_id", "requested_by", "requested_at"],
    "send_slot": ["key", "next_at"],
    "conversation_extensions": ["conversation_id", "names", "policy"],
    "approval": [
        "id", "conversation_id", "turn_position", "iteration_position", "block_position", "seq",
        "extension", "function", "effect", "arguments", "approved", "reason", "remember",
        "created_at",
    ],
    "conversation_profile": [
        "id", "conversation_id", "from_turn", "instructions", "model", "set_at",
    ],
    "delivery": ["key", "at"],
    "inbox": [
        "key", "sender", "lane", "seq", "body", "received_at", "holder", "held_until",
        "started_at", "conversation_id", "position",
    ],
    "schema_migrations": ["version", "name", "applied_at"],
    # The FTS5 virtual table and the shadow tables SQLite keeps for it.
    "search_fts": ["text"],
    "search_fts_config": ["k", "v"],
    "search_fts_content": ["id", "c0"],
    "search_fts_data": ["id", "block"],
    "search_fts_docsize": ["id", "sz"],
    "search_fts_idx": ["segid", "term", "pgno"],
}  # fmt: skip

INDEXES = {
    "block_result_blob": ("block", ["result_blob"]),
    "block_figure_digest": ("block_figure", ["digest"]),
    "conversation_parent": ("conversation", ["parent_id"]),
    "conversation_updated": ("conversation", ["updated_at"]),
    "conversation_owner": ("conversation", ["owner", "updated_at"]),
    "iteration_system_prompt": ("iteration", ["system_prompt_hash"]),
    "search_doc_turn": ("search_doc", ["turn_id"]),
    "turn_running": ("turn", ["conversation_id"]),
    "var_version_blob": ("var_version", ["encoded_blob"]),
    "var_version_block": ("var_version", ["block_id"]),
    "var_version_root": ("var_version", ["root_chunk"]),
    "value_ref_unused": ("value_ref", ["chunk_id"]),
    "conversation_profile_turn": ("conversation_profile", ["conversation_id", "from_turn"]),
    "sqlite_autoindex_value_chunk_1": ("value_chunk", ["hash"]),
    # Primary keys on TEXT and UNIQUE constraints.
    "sqlite_autoindex_blob_1": ("blob", ["hash"]),
    "sqlite_autoindex_conversation_1": ("conversation", ["id"]),
    "sqlite_autoindex_conversation_2": ("conversation", ["channel", "external_id"]),
    "sqlite_autoindex_turn_1": ("turn", ["conversation_id", "position"]),
    "sqlite_autoindex_iteration_1": ("iteration", ["turn_id", "position"]),
    "sqlite_autoindex_block_1": ("block", ["iteration_id", "position"]),
    "sqlite_autoindex_var_version_1": ("var_version", ["conversation_id", "name", "version"]),
    "sqlite_autoindex_subquery_1": ("subquery", ["iteration_id", "position"]),
    "sqlite_autoindex_steering_1": ("steering", ["iteration_id", "position"]),
    "sqlite_autoindex_turn_note_1": ("turn_note", ["turn_id", "seq"]),
    "sqlite_autoindex_block_figure_1": ("block_figure", ["block_id", "position"]),
    "sqlite_autoindex_send_slot_1": ("send_slot", ["key"]),
    "sqlite_autoindex_conversation_extensions_1": ("conversation_extensions", ["conversation_id"]),
    "sqlite_autoindex_approval_1": (
        "approval",
        ["conversation_id", "turn_position", "iteration_position", "block_position", "seq"],
    ),
    "sqlite_autoindex_delivery_1": ("delivery", ["key"]),
    "delivery_at": ("delivery", ["at"]),
    "sqlite_autoindex_inbox_1": ("inbox", ["key"]),
    "inbox_lane": ("inbox", ["sender", "lane", "seq"]),
    "inbox_claim": ("inbox", ["sender", "held_until"]),
}


def conn_application_id(path: Path) -> int:
    with raw(path) as conn:
        return int(conn.execute("PRAGMA application_id").fetchone()[0])


async def test_an_empty_database_migrates_to_exactly_the_documented_schema(db_path: Path) -> None:
    async with Store.open(db_path):
        pass
    with raw(db_path) as conn:
        entries = conn.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall()
        tables = {
            name: [column[1] for column in conn.execute(f"PRAGMA table_info({name})")]
            for kind, name, _ in entries
            if kind == "table"
        }
        indexes = {
            name: (table, [column[2] for column in conn.execute(f"PRAGMA index_info({name})")])
            for kind, name, table in entries
            if kind == "index"
        }
        triggers = {(name, table) for kind, name, table in entries if kind == "trigger"}
        applied = conn.execute("SELECT version, name FROM schema_migrations").fetchall()
        pragmas = (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA foreign_key_check").fetchall(),
        )
    assert tables == TABLES
    assert indexes == INDEXES
    assert triggers == {("search_doc_delete", "search_doc")}
    assert {kind for kind, _, _ in entries} == {"table", "index", "trigger"}
    assert applied == [(m.version, m.name) for m in migrations()]
    assert conn_application_id(db_path) == APPLICATION_ID
    assert pragmas == ("wal", [])


async def test_reopening_applies_nothing_twice_and_keeps_data(db_path: Path) -> None:
    async with Store.open(db_path) as store:
        conversation = await store.create_conversation(channel="cli", title="kept")
    async with Store.open(db_path) as store:
        assert (await store.get_conversation(conversation.id)).title == "kept"
        assert store.schema_version == latest_version()
    assert count(db_path, "schema_migrations") == len(migrations())


async def test_an_empty_file_is_a_new_database(db_path: Path) -> None:
    write_file(db_path, b"")
    async with Store.open(db_path) as store:
        assert await store.list_conversations() == []


async def test_a_newer_schema_is_refused_naming_both_versions_and_left_untouched(
    db_path: Path,
) -> None:
    async with Store.open(db_path) as store:
        await store.create_conversation(channel="cli")
    with raw(db_path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (70, 'future', 0)")
        conn.commit()
    before = file_bytes(db_path)

    with pytest.raises(SchemaTooNew) as raised:
        await Store.open(db_path)

    supported = latest_version()
    assert (raised.value.found, raised.value.supported) == (70, supported)
    assert "version 70" in str(raised.value) and f"up to version {supported}" in str(raised.value)
    assert file_bytes(db_path) == before


@pytest.mark.parametrize(
    "content",
    [b"just some notes\n" * 100, b"x", b"SQLite format 2\x00" + b"\x00" * 200],
    ids=["text", "one-byte", "wrong-header"],
)
async def test_a_file_that_is_not_sqlite_is_refused_and_never_modified(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.txt"
    write_file(path, content)

    with pytest.raises(NotADatabase, match="not a cove database"):
        await Store.open(path)

    assert file_bytes(path) == content
    assert file_names(tmp_path) == ["notes.txt"]


async def test_a_corrupt_file_with_a_sqlite_header_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    content = b"SQLite format 3\x00" + b"\xff" * 4000
    write_file(path, content)

    with pytest.raises(StoreError, match="database error"):
        await Store.open(path)

    assert file_bytes(path) == content


def test_migration_files_have_distinct_ascending_numbers() -> None:
    found = migrations()
    versions = [migration.version for migration in found]
    assert versions == sorted(set(versions)) and versions[0] == 1
    assert found[0].name == "init"
    assert all(statement.rstrip().endswith(";") for statement in found[0].statements)


def test_statements_split_on_completeness_including_triggers() -> None:
    script = (
        "-- comment; with a semicolon\n"
        "CREATE TABLE a (x);\n"
        "CREATE TRIGGER t AFTER DELETE ON a BEGIN\n"
        "    DELETE FROM a WHERE x = old.x;\n"
        "END;\n"
        "-- trailing comment\n"
    )
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")


def test_an_unfinished_statement_in_a_migration_is_an_error() -> None:
    with pytest.raises(StoreError, match="incomplete SQL statement"):
        split_statements("CREATE TABLE a (x);\nCREATE TABLE b (y)\n")


async def test_a_migration_numbered_below_the_highest_applied_is_still_applied(
    db_path: Path,
) -> None:
    """Branches add migrations in parallel: a database that has 1 and 3 still gets 2."""
    async with Store.open(db_path):
        pass
    with raw(db_path) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = 1")
        conn.commit()
    # Version 1 now looks unapplied; re-running its statements fails on the existing tables,
    # which proves the migrator tried it although a higher number is recorded.
    with pytest.raises(StoreError, match="already exists"):
        await Store.open(db_path)


async def test_nudges_kept_before_their_kinds_were_recorded_are_classified(
    db_path: Path,
) -> None:
    """0017 adds ``turn_note.nudge_kind``; older notes get the kind of the rule they read as,
    and the rest of the note stays as it was."""
    async with Store.open(db_path) as store:
        conv = await store.create_conversation(channel="cli")
        turn = await store.start_turn(conv.id, "one")
    texts = {
        "The conversation has no title yet: add a title": "title",
        "Your answer was refused: undefined placeholder(s) {{x}}.": "refusal",
        "2 iterations left, this one included: wrap up": "iterations_left",
        "The last 3 iterations failed. Read the error": "error_streak",
        "Mind the units (from an extension)": "extension",
    }
    with raw(db_path) as conn:  # the table as 0012 made it, and 0017 not applied yet
        conn.execute("DROP TABLE turn_note")
        conn.executescript((MIGRATIONS / "0012_turn_notes.sql").read_text())
        conn.execute("DELETE FROM schema_migrations WHERE version = 17")
        for seq, text in enumerate(texts, start=1):
            conn.execute(
                "INSERT INTO turn_note (turn_id, seq, kind, text, created_at)"
                " VALUES (?, ?, 'nudge', ?, 0)",
                (turn.id, seq, text),
            )
        conn.execute(
            "INSERT INTO turn_note (turn_id, seq, kind, text, created_at)"
            " VALUES (?, 99, 'sandbox_restarted', 'timeout', 0)",
            (turn.id,),
        )
        conn.commit()
    async with Store.open(db_path) as store:
        notes = (await store.transcript(conv.id)).notes
    assert {n.text: n.nudge_kind for n in notes if n.kind == "nudge"} == texts
    assert [n.nudge_kind for n in notes if n.kind == "sandbox_restarted"] == [None]
    assert [n.seq for n in notes] == [1, 2, 3, 4, 5, 99]


async def test_turns_recorded_before_costs_were_marked_known_are_judged_by_what_they_used(
    db_path: Path,
) -> None:
    """Migration 0014: a turn that used tokens and cost nothing was unpriced (unknown cost)."""
    async with Store.open(db_path) as store:
        conv = await store.create_conversation(channel="cli")
        for _ in range(3):
            turn = await store.start_turn(conv.id, "q")
            await store.finish_turn(turn.id, TurnOutcome("done", answer="a"))
    with raw(db_path) as conn:  # as a database from before 0014 held them
        conn.execute("ALTER TABLE turn DROP COLUMN cost_known")
        conn.execute("ALTER TABLE iteration DROP COLUMN refusal")
        conn.execute("DELETE FROM schema_migrations WHERE version = 14")
        conn.execute("UPDATE turn SET tokens_in = 100, cost_usd = 0.25 WHERE position = 1")
        conn.execute("UPDATE turn SET tokens_in = 100, cost_usd = 0 WHERE position = 2")
        conn.commit()
    async with Store.open(db_path) as store:
        known = [t.cost_known for t in await store.turns(conv.id)]
    assert known == [True, False, True]  # priced; used tokens for nothing: unpriced; unused
