"""Builders and probes for the value store tests: chunked versions, turns, and counts checked
from scratch."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from cove.codec import decode, encode_tree
from cove.codec.chunks import Tree, refs
from cove.persistence.records import IterationWrite
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, VarVersion
from tests.persistence.store_helpers import SYSTEM_PROMPT, raw


def tree(value: Any) -> Tree:
    """``value`` as a tree of chunks (every chunk built)."""
    return encode_tree(value, max_bytes=1 << 31, max_depth=100)


def version(name: str, number: int, value: Any) -> VarVersion:
    """Version ``number`` of ``name`` holding ``value``, with its tree's chunks."""
    built = tree(value)
    return VarVersion(
        name=name,
        kind="value",
        encoded=built.root,
        type_name=type(value).__name__,
        preview=repr(value)[:40],
        version=number,
        chunks=tuple(built.chunks.items()),
    )


async def write_turn(store: Store, conversation_id: str, *versions: VarVersion) -> int:
    """One turn of one iteration whose one block wrote ``versions``; the turn's position."""
    turn = await store.start_turn(conversation_id, "r")
    iteration = await store.start_iteration(
        turn.id, 0, system_prompt=SYSTEM_PROMPT, request_message="r", context_message="c"
    )
    block = BlockResult(position=0, code="x = 1", ok=True)
    await store.record_block(iteration, block, versions)
    await store.finish_iteration(iteration, IterationWrite(status="ok"))
    await store.finish_turn(turn.id, TurnOutcome("done", answer="a"))
    return turn.position


async def value_of(store: Store, conversation_id: str, name: str, number: int) -> Any:
    """A stored version's value, decoded from its chunks."""
    record = await store.var_version(conversation_id, name, number)
    assert record.encoded is not None
    chunks = await store.value_chunks([record.encoded])
    return decode(record.encoded, chunks=chunks.__getitem__)


def chunk_bytes(path: Path) -> int:
    """The bytes of every stored chunk."""
    with raw(path) as conn:
        return int(
            conn.execute("SELECT coalesce(sum(length(data)), 0) FROM value_chunk").fetchone()[0]
        )


def check_value_store(conn: sqlite3.Connection) -> None:
    """Every count is what the versions and chunks make it, and every chunk a version reaches
    is stored (computed from scratch, not from the counts)."""
    chunks = {
        int(row[0]): (str(row[1]), bytes(row[2]), json.loads(row[3]))
        for row in conn.execute("SELECT id, hash, data, children FROM value_chunk")
    }
    by_name = {name: chunk_id for chunk_id, (name, _, _) in chunks.items()}
    expected = dict.fromkeys(chunks, 0)
    for (root,) in conn.execute("SELECT root_chunk FROM var_version WHERE root_chunk IS NOT NULL"):
        assert root in chunks, "a version's root chunk is gone"
        expected[root] += 1
    for chunk_id, (_, data, children) in chunks.items():
        named = list(dict.fromkeys(refs(data)))
        assert [by_name.get(n) for n in named] == children, f"chunk {chunk_id} lost a child"
        for child in children:
            expected[child] += 1
    counted = {int(r[0]): int(r[1]) for r in conn.execute("SELECT chunk_id, refs FROM value_ref")}
    assert counted == expected
