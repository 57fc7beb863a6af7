"""The value store: chunks of variable values, shared by content and counted (migration 0019).

A version's value is a root (``cove.codec.chunks``): kept inline in its row when it is short and
names no chunk, else stored as a chunk itself (``var_version.root_chunk``). ``put_chunks`` adds
the chunks a version brings, children first, each once whatever holds it already; ``value_ref``
counts, for every chunk, the versions whose root it is and the chunks naming it. Releasing a
version (a deleted conversation, a thinned one) lowers its root's count; ``collect`` then deletes
the chunks nothing counts, in batches of one transaction each, lowering their children's counts
in the same transaction. A crash between batches leaves every count true and the rest for the
next ``collect``; no chunk any version still reaches is ever deleted.

Everything here runs on the store's connection thread, inside the caller's transaction unless a
function says otherwise.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence

from cove.codec.chunks import chunk_hash, refs, text_hash
from cove.errors import StoreError
from cove.persistence.connection import INLINE_LIMIT, immediate

COLLECT_BATCH = 500
"""Chunks deleted per transaction by ``collect``."""

_IN_BATCH = 500  # names per ``IN (...)`` list


def put_chunks(conn: sqlite3.Connection, chunks: Iterable[tuple[str, bytes]]) -> int:
    """Add the chunks the database lacks (children before parents); the bytes added.

    Raises:
        StoreError: A chunk's data does not hash to its name, or it names a chunk that is
            neither stored nor given before it (nothing is added then: the caller's
            transaction rolls back).
    """
    added = 0
    for name, data in chunks:
        if conn.execute("SELECT 1 FROM value_chunk WHERE hash = ?", (name,)).fetchone():
            continue
        if chunk_hash(data) != name:
            raise StoreError(f"chunk {name} does not hold what its name says")
        _insert(conn, name, data)
        added += len(data)
    return added


def _insert(conn: sqlite3.Connection, name: str, data: bytes) -> int:
    """Insert a chunk whose children are stored; count it as their parent. Its id."""
    kids = list(dict.fromkeys(refs(data)))
    ids = chunk_ids(conn, kids)
    missing = [kid for kid in kids if kid not in ids]
    if missing:
        raise StoreError(f"chunk {name} names chunk {missing[0]}, which is not stored")
    children = [ids[kid] for kid in kids]
    cursor = conn.execute(
        "INSERT INTO value_chunk (hash, data, children) VALUES (?, ?, ?)",
        (name, data, json.dumps(children)),
    )
    chunk_id = int(cursor.lastrowid or 0)
    conn.execute("INSERT INTO value_ref (chunk_id, refs) VALUES (?, 0)", (chunk_id,))
    _add_refs(conn, children, 1)
    return chunk_id


def chunk_ids(conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, int]:
    """The ids of the stored chunks among ``names``."""
    found: dict[str, int] = {}
    for start in range(0, len(names), _IN_BATCH):
        batch = names[start : start + _IN_BATCH]
        marks = ",".join("?" * len(batch))
        for row in conn.execute(f"SELECT hash, id FROM value_chunk WHERE hash IN ({marks})", batch):
            found[row[0]] = int(row[1])
    return found


def _add_refs(conn: sqlite3.Connection, ids: Sequence[int], delta: int) -> None:
    for start in range(0, len(ids), _IN_BATCH):
        batch = ids[start : start + _IN_BATCH]
        marks = ",".join("?" * len(batch))
        conn.execute(
            f"UPDATE value_ref SET refs = refs + ? WHERE chunk_id IN ({marks})", [delta, *batch]
        )


def put_root(conn: sqlite3.Connection, root: str) -> tuple[str | None, int | None, int]:
    """Keep a version's root: ``(inline text, None, 0)`` when it is short and names no chunk,
    else ``(None, root chunk id, bytes added)`` with the chunk counted once more (for the
    version that will name it).

    Raises:
        StoreError: The root names a chunk that is not stored.
    """
    data = root.encode("utf-8", "surrogatepass")
    names = refs(data)
    if not names and len(data) <= INLINE_LIMIT:
        return root, None, 0
    name = text_hash(root)
    added = put_chunks(conn, [(name, data)])
    chunk_id = chunk_ids(conn, [name])[name]
    _add_refs(conn, [chunk_id], 1)
    return None, chunk_id, added


def release_roots(conn: sqlite3.Connection, where: str, params: Sequence[object]) -> None:
    """Lower the counts of the root chunks of the versions matching ``where`` (one per row)."""
    conn.execute(
        f"""
        UPDATE value_ref SET refs = refs - (
            SELECT count(*) FROM var_version v WHERE v.root_chunk = value_ref.chunk_id AND {where}
        )
        WHERE chunk_id IN (
            SELECT root_chunk FROM var_version v WHERE v.root_chunk IS NOT NULL AND {where}
        )
        """,
        [*params, *params],
    )


def collect_batch(conn: sqlite3.Connection, limit: int = COLLECT_BATCH) -> int:
    """Delete up to ``limit`` chunks nothing counts, in one transaction; how many went."""
    with immediate(conn):
        rows = conn.execute(
            "SELECT r.chunk_id, c.children FROM value_ref r"
            " JOIN value_chunk c ON c.id = r.chunk_id WHERE r.refs = 0 LIMIT ?",
            (limit,),
        ).fetchall()
        for chunk_id, children in rows:
            conn.execute("DELETE FROM value_chunk WHERE id = ?", (chunk_id,))
            conn.execute("DELETE FROM value_ref WHERE chunk_id = ?", (chunk_id,))
            _add_refs(conn, json.loads(children), -1)
    return len(rows)


def collect(conn: sqlite3.Connection) -> int:
    """Delete every chunk nothing counts any more (batch after batch); how many went."""
    total = 0
    while True:
        removed = collect_batch(conn)
        total += removed
        if removed == 0:
            return total


def garbage(conn: sqlite3.Connection) -> int:
    """How many chunks wait for ``collect``."""
    return int(conn.execute("SELECT count(*) FROM value_ref WHERE refs = 0").fetchone()[0])


def read_chunks(conn: sqlite3.Connection, roots: Iterable[str]) -> dict[str, bytes]:
    """Every stored chunk the given roots reach, by name (a missing one is left out: decoding
    then says which value lacks it)."""
    found: dict[str, bytes] = {}
    names = list(dict.fromkeys(name for root in roots for name in refs(root)))
    level = list(chunk_ids(conn, names).values())
    seen: set[int] = set()
    while level:
        following: list[int] = []
        for start in range(0, len(level), _IN_BATCH):
            batch = [i for i in level[start : start + _IN_BATCH] if i not in seen]
            seen.update(batch)
            if not batch:
                continue
            marks = ",".join("?" * len(batch))
            for name, data, children in conn.execute(
                f"SELECT hash, data, children FROM value_chunk WHERE id IN ({marks})", batch
            ):
                found[name] = bytes(data)
                following.extend(i for i in json.loads(children) if i not in seen)
        level = list(dict.fromkeys(following))
    return found


def read_named(conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, bytes]:
    """The stored chunks among ``names`` (not what they reach)."""
    found: dict[str, bytes] = {}
    for start in range(0, len(names), _IN_BATCH):
        batch = names[start : start + _IN_BATCH]
        marks = ",".join("?" * len(batch))
        for name, data in conn.execute(
            f"SELECT hash, data FROM value_chunk WHERE hash IN ({marks})", batch
        ):
            found[name] = bytes(data)
    return found


def root_text(conn: sqlite3.Connection, chunk_id: int) -> str | None:
    """The root a version stores as chunk ``chunk_id`` (None when it is gone)."""
    row = conn.execute("SELECT data FROM value_chunk WHERE id = ?", (chunk_id,)).fetchone()
    return None if row is None else bytes(row[0]).decode("utf-8", "surrogatepass")


def stats(conn: sqlite3.Connection) -> Mapping[str, int]:
    """The value store as a whole: chunks, their bytes, and those waiting to be collected."""
    chunks, size = conn.execute(
        "SELECT count(*), coalesce(sum(length(data)), 0) FROM value_chunk"
    ).fetchone()
    return {"chunks": int(chunks), "bytes": int(size), "garbage": garbage(conn)}
