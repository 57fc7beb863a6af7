"""A database made by main before values were chunked (``tests/persistence/fixtures``): it is
migrated on open, its values read and restore exactly as they were written, and new versions of
them are written as chunks from then on."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cove import codec
from cove.persistence.migrate import latest_version
from cove.persistence.store import Store
from tests.environment.test_environment import Harness
from tests.persistence.store_helpers import raw
from tests.persistence.value_helpers import check_value_store, chunk_bytes

pytestmark = pytest.mark.slow  # sandbox workers started per test

MADE_BY_MAIN = Path(__file__).parents[1] / "persistence" / "fixtures" / "main-0015.db"


def written_texts(path: Path) -> dict[tuple[str, str, int], str]:
    """Every stored value text as main wrote it (inline or in a blob), by (title, name, version)."""
    with raw(path) as conn:
        conn.row_factory = sqlite3.Row
        return {
            (row["title"], row["name"], row["version"]): (
                row["encoded"] if row["data"] is None else bytes(row["data"]).decode()
            )
            for row in conn.execute(
                "SELECT c.title, v.name, v.version, v.encoded, b.data FROM var_version v"
                " JOIN conversation c ON c.id = v.conversation_id"
                " LEFT JOIN blob b ON b.hash = v.encoded_blob"
                " WHERE v.encoded IS NOT NULL OR v.encoded_blob IS NOT NULL"
            )
        }


@pytest.fixture
def db(tmp_path: Path) -> Path:
    copy = tmp_path / "cove.db"
    shutil.copyfile(MADE_BY_MAIN, copy)
    return copy


@pytest.fixture
async def harness(tmp_path: Path, db: Path) -> AsyncIterator[Harness]:
    assert db == tmp_path / "cove.db"  # the harness opens the copy
    async with Harness.running(tmp_path) as h:
        listed = await h.store.list_conversations()
        [main] = [c for c in listed if c.title == "made by main"]
        h.conversation_id = main.id
        yield h


async def test_the_values_main_wrote_read_as_they_were_written(db: Path) -> None:
    before = written_texts(db)
    async with Store.open(db) as store:
        assert store.schema_version == latest_version()
        conversations = {c.title: c.id for c in await store.list_conversations()}
        for (title, name, number), text in before.items():
            record = await store.var_version(conversations[title], name, number)
            assert record.encoded == text and not record.thinned
            chunks = await store.value_chunks([text])
            assert chunks == {}  # written whole: nothing to gather
            if record.kind in ("value", "function") and codec.is_restorable(text):
                assert codec.encode(codec.decode(text)) == text
        figures = await store.history(conversations["made by main"])
        assert figures.history_bytes > 0  # nums v1, a blob, is history now
    with raw(db) as conn:
        check_value_store(conn)


async def test_restored_from_main_then_versioned_in_chunks(harness: Harness, db: Path) -> None:
    env = await harness.open()
    assert set(env.restored.restored) >= {"n", "nums", "big", "cfg", "f", "arr"}
    [(outcome, _)] = await harness.turn(
        env,
        "(n, len(nums), nums[-1], big == list(range(20_000)), cfg, f(1), int(arr.sum()))",
    )
    expected = "(7, 3001, -1, True, {'a': 1, 'b': [1, 2], 'c': 3}, 8, 12497500)"
    assert outcome.result.result_preview == expected
    [(_, first)] = await harness.turn(env, "big.append(1)")
    assert [(v.name, v.version) for v in first] == [("big", 2)]
    stored = chunk_bytes(db)
    [(_, second)] = await harness.turn(env, "big.append(2)")
    assert [(v.name, v.version) for v in second] == [("big", 3)]
    assert chunk_bytes(db) - stored <= 16 * 1024
    await env.aclose()
    env = await harness.open()
    [(outcome, _)] = await harness.turn(env, "big == [*range(20_000), 1, 2]")
    assert outcome.result.result_preview == "True"
    await env.aclose()
    with raw(db) as conn:
        check_value_store(conn)
        roots = conn.execute(
            "SELECT version, root_chunk IS NOT NULL FROM var_version WHERE name = 'big'"
            " ORDER BY version"
        ).fetchall()
    assert roots == [(1, 0), (2, 1), (3, 1)]


async def test_main_s_fork_reads_and_both_delete_cleanly(harness: Harness, db: Path) -> None:
    store = harness.store
    [fork] = [c for c in await store.list_conversations() if c.title == "fork"]
    env = await harness.open(conversation_id=fork.id)
    [(outcome, _), _] = await harness.turn(env, "nums[-3:]", "nums.append(5)")
    assert outcome.result.result_preview == "[2998, 2999, -2]"
    await env.aclose()
    await store.delete_conversation(fork.id)
    await store.delete_conversation(harness.conversation_id)
    with raw(db) as conn:
        assert conn.execute("SELECT count(*) FROM blob").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM value_chunk").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM value_ref").fetchone()[0] == 0
