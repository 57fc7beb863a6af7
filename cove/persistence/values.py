"""The value store: chunks of variable values, shared by content and counted (migration 0019).

A version's value is a root (``cove.codec.chunks``): kept inline in its row when it is short and
names no chunk, else stored as a chunk itself (``var_version.root_chunk``). ``put_value`` adds
the chunks a version brings, children first, each once whatever holds it already; ``value_ref``
counts, for every chunk, the versions whose root it is and the chunks naming it. Releasing a
version (a deleted conversation, a thinned one) lowers its root's count; ``collect`` then deletes
the chunks nothing counts, in batches of one transaction each, lowering their children's counts
in the same transaction. A crash between batches leaves every count true and the rest for the
next ``collect``; no chunk any version still reaches is ever deleted.

Everything here runs inside the caller's transaction unless a function says otherwise. On
PostgreSQL, where several processes write at once, every transaction that adds, counts or
deletes chunks first takes the value store's transaction lock (``Dialect.lock_values``), so a
chunk found stored cannot be collected before the version naming it commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from cove.codec.chunks import chunk_hash, refs, text_hash
from cove.errors import StoreError
from cove.persistence.blobs import INLINE_LIMIT
from cove.persistence.database import Call
from cove.persistence.sql import Sql

COLLECT_BATCH = 500
"""Chunks deleted per transaction by ``collect``."""

_IN_BATCH = 500  # names per ``IN (...)`` list


async def put_value(
    db: Sql, chunks: Iterable[tuple[str, bytes]], root: str
) -> tuple[str | None, int | None, int]:
    """Keep a version's value: the chunks the database lacks (children before parents), then
    its root — ``(inline text, None, bytes added)`` when the root is short and names no chunk,
    else ``(None, root chunk id, bytes added)`` with the root chunk counted once more (for the
    version that will name it).

    A few statements whatever the value's size: one lookup of every chunk named, one insert
    per new chunk, one for their counts, one update per distinct count change of the chunks
    stored before.

    Raises:
        StoreError: A chunk's data does not hash to its name, or it names a chunk that is
            neither stored nor given before it (nothing is added then: the caller's
            transaction rolls back).
    """
    given = list(chunks)
    data = root.encode("utf-8", "surrogatepass")
    root_kids = refs(data)
    inline = not root_kids and len(data) <= INLINE_LIMIT
    root_name = None if inline else text_hash(root)
    if root_name is not None:
        given.append((root_name, data))
    if not given:
        return root, None, 0
    await db.dialect.lock_values(db)
    kids_of = {name: list(dict.fromkeys(refs(chunk))) for name, chunk in given}
    named = list(dict.fromkeys([*kids_of, *(kid for kids in kids_of.values() for kid in kids)]))
    ids = await chunk_ids(db, named)
    counts: dict[int, int] = {}
    added = 0
    new: list[int] = []
    for name, chunk in given:
        if name in ids:
            continue
        if chunk_hash(chunk) != name:
            raise StoreError(f"chunk {name} does not hold what its name says")
        missing = [kid for kid in kids_of[name] if kid not in ids]
        if missing:
            raise StoreError(f"chunk {name} names chunk {missing[0]}, which is not stored")
        children = [ids[kid] for kid in kids_of[name]]
        ids[name] = int(
            await db.value(
                "INSERT INTO value_chunk (hash, data, children) VALUES (?, ?, ?) RETURNING id",
                (name, chunk, json.dumps(children)),
            )
        )
        new.append(ids[name])
        added += len(chunk)
        for child in children:
            counts[child] = counts.get(child, 0) + 1
    if root_name is not None:
        counts[ids[root_name]] = counts.get(ids[root_name], 0) + 1
    await _new_refs(db, [(chunk_id, counts.pop(chunk_id, 0)) for chunk_id in new])
    by_delta: dict[int, list[int]] = {}
    for chunk_id, delta in counts.items():
        by_delta.setdefault(delta, []).append(chunk_id)
    for delta, chunk_ids_ in by_delta.items():
        await _add_refs(db, chunk_ids_, delta)
    return (root if inline else None), (None if root_name is None else ids[root_name]), added


async def _new_refs(db: Sql, counted: Sequence[tuple[int, int]]) -> None:
    """The counts of chunks just inserted (by the parents inserted with them, the root)."""
    for start in range(0, len(counted), _IN_BATCH):
        batch = counted[start : start + _IN_BATCH]
        marks = ",".join("(?, ?)" for _ in batch)
        await db.run(
            f"INSERT INTO value_ref (chunk_id, refs) VALUES {marks}",
            [value for pair in batch for value in pair],
        )


async def chunk_ids(db: Sql, names: Sequence[str]) -> dict[str, int]:
    """The ids of the stored chunks among ``names``."""
    found: dict[str, int] = {}
    for start in range(0, len(names), _IN_BATCH):
        batch = names[start : start + _IN_BATCH]
        marks = ",".join("?" * len(batch))
        for row in await db.rows(
            f"SELECT hash, id FROM value_chunk WHERE hash IN ({marks})", batch
        ):
            found[row[0]] = int(row[1])
    return found


async def _add_refs(db: Sql, ids: Sequence[int], delta: int) -> None:
    for start in range(0, len(ids), _IN_BATCH):
        batch = ids[start : start + _IN_BATCH]
        marks = ",".join("?" * len(batch))
        await db.run(
            f"UPDATE value_ref SET refs = refs + ? WHERE chunk_id IN ({marks})", [delta, *batch]
        )


async def release_roots(db: Sql, where: str, params: Sequence[object]) -> None:
    """Lower the counts of the root chunks of the versions matching ``where`` (one per row)."""
    await db.dialect.lock_values(db)
    await db.run(
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


async def collect_batch(call: Call, limit: int = COLLECT_BATCH) -> int:
    """Delete up to ``limit`` chunks nothing counts, in one transaction; how many went."""
    async with call.writing() as db:
        await db.dialect.lock_values(db)
        rows = await db.rows(
            "SELECT r.chunk_id, c.children FROM value_ref r"
            " JOIN value_chunk c ON c.id = r.chunk_id WHERE r.refs = 0 LIMIT ?",
            (limit,),
        )
        for chunk_id, children in rows:
            await db.run("DELETE FROM value_chunk WHERE id = ?", (chunk_id,))
            await db.run("DELETE FROM value_ref WHERE chunk_id = ?", (chunk_id,))
            await _add_refs(db, json.loads(children), -1)
    return len(rows)


async def collect_values(call: Call) -> int:
    """Delete the chunks nothing holds any more (batch after batch); how many went."""
    total = 0
    while True:
        removed = await collect_batch(call)
        total += removed
        if removed == 0:
            return total


async def _garbage(db: Sql) -> int:
    """How many chunks wait for ``collect_values``."""
    return int(await db.value("SELECT count(*) FROM value_ref WHERE refs = 0"))


async def value_chunks(call: Call, roots: Sequence[str]) -> dict[str, bytes]:
    """Every stored chunk the given roots (``VarVersionRecord.encoded``) reach, by name: what
    ``codec.decode(root, chunks=found.__getitem__)`` needs (a missing one is left out: decoding
    then says which value lacks it)."""
    found: dict[str, bytes] = {}
    names = list(dict.fromkeys(name for root in roots for name in refs(root)))
    async with call.reading() as db:
        level = list((await chunk_ids(db, names)).values())
        seen: set[int] = set()
        while level:
            following: list[int] = []
            for start in range(0, len(level), _IN_BATCH):
                batch = [i for i in level[start : start + _IN_BATCH] if i not in seen]
                seen.update(batch)
                if not batch:
                    continue
                marks = ",".join("?" * len(batch))
                for name, data, children in await db.rows(
                    f"SELECT hash, data, children FROM value_chunk WHERE id IN ({marks})", batch
                ):
                    found[name] = bytes(data)
                    following.extend(i for i in json.loads(children) if i not in seen)
            level = list(dict.fromkeys(following))
    return found


async def chunks(call: Call, names: Sequence[str]) -> dict[str, bytes]:
    """The stored chunks among ``names``, by name (not what they reach)."""
    found: dict[str, bytes] = {}
    async with call.reading() as db:
        for start in range(0, len(names), _IN_BATCH):
            batch = list(names[start : start + _IN_BATCH])
            marks = ",".join("?" * len(batch))
            for name, data in await db.rows(
                f"SELECT hash, data FROM value_chunk WHERE hash IN ({marks})", batch
            ):
                found[name] = bytes(data)
    return found


async def root_text(db: Sql, chunk_id: int) -> str | None:
    """The root a version stores as chunk ``chunk_id`` (None when it is gone)."""
    data = await db.value("SELECT data FROM value_chunk WHERE id = ?", (chunk_id,))
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


async def value_stats(call: Call) -> Mapping[str, int]:
    """The value store as a whole: ``chunks``, their ``bytes``, and ``garbage`` (chunks
    nothing holds, waiting to be collected)."""
    async with call.reading() as db:
        row = await db.row("SELECT count(*), coalesce(sum(length(data)), 0) FROM value_chunk")
        garbage = await _garbage(db)
    assert row is not None
    return {"chunks": int(row[0]), "bytes": int(row[1]), "garbage": garbage}
