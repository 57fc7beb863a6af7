"""An iteration's units as one statement each, where the backend chains writes (PostgreSQL).

The guarded write comes first, as a ``WITH`` query; what depends on it — a block's variable
versions and result blob, the search index of a closing iteration's code — follows as
data-modifying ``WITH`` queries that read the guarded write's ``RETURNING`` rows, so each
writes only when the guarded write did. One statement is one transaction on its own: a unit
made of it alone costs one round trip (``Sql``'s ``last=True``) and, refused, writes nothing.
What the statements write is exactly what ``iteration_rows`` writes statement by statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cove.persistence.blobs import blob_hash, split_encoded
from cove.persistence.database import Call
from cove.persistence.fence import Fence
from cove.persistence.iteration_rows import (
    INSERT_BLOCK,
    Running,
    VersionRow,
    block_columns,
    iteration_guard,
    refused,
    version_rows,
)
from cove.persistence.records import IterationWrite
from cove.persistence.sql import Sql
from cove.results import BlockResult, VarVersion

#: The columns of ``VersionRow`` as typed arrays, one element per version (``unnest``).
_VERSION_ARRAYS = (
    "unnest(CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS bigint[]), CAST(? AS text[]),"
    " CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS text[]), CAST(? AS text[]),"
    " CAST(? AS text[]), CAST(? AS bigint[])) AS x (name, version, block_id, kind, encoded,"
    " root_chunk, digest, type_name, preview, size)"
)


def _version_columns(rows: Sequence[VersionRow]) -> list[list[Any]]:
    """The versions' columns, each as one list (the parameters of ``_VERSION_ARRAYS``)."""
    return [
        [row.name for row in rows],
        [row.version for row in rows],
        [row.block_id for row in rows],
        [row.kind for row in rows],
        [row.encoded for row in rows],
        [row.root_chunk for row in rows],
        [row.digest for row in rows],
        [row.type_name for row in rows],
        [row.preview for row in rows],
        [row.size for row in rows],
    ]


async def chained_block(
    call: Call, db: Sql, iteration_id: int, block: BlockResult, versions: Sequence[VarVersion]
) -> tuple[Running, int]:
    """Insert a block of the running iteration ``iteration_id`` with its variable versions (and
    its result's blob) in one statement; the iteration's conversation and the bytes the
    versions' chunks added (a value kept in chunks stores them first, in the same transaction).

    Raises:
        NotFound, Busy: as ``refused`` says, when the iteration no longer runs or the fence is
            stale (nothing written).
        StoreError: a version names a block the iteration does not have.
    """
    rows, added = await version_rows(db, iteration_id, versions, {block.position: None})
    inline, data = split_encoded(block.result_encoded)
    digest = None if data is None else blob_hash(data)
    guard, guarded = iteration_guard(db, iteration_id, call.fence)
    fields = block_columns(block, inline, digest)
    query = (
        "WITH g AS (SELECT i.id, t.conversation_id, c.value_bytes - c.history_mark AS grown"
        + guard
        + "), b AS ("
        + INSERT_BLOCK
        + " SELECT g.id, "
        + ", ".join("?" * len(fields))
        + " FROM g RETURNING id)"
    )
    params: list[Any] = [*guarded, *fields]
    if rows:
        query += (
            ", v AS (INSERT INTO var_version (conversation_id, name, version, block_id, kind,"
            " encoded, root_chunk, digest, type_name, preview, size, created_at)"
            " SELECT g.conversation_id, x.name, x.version, coalesce(x.block_id, b.id), x.kind,"
            " x.encoded, x.root_chunk, x.digest, x.type_name, x.preview, x.size, ?"
            " FROM g, b, " + _VERSION_ARRAYS + ")"
        )
        params += [call.now, *_version_columns(rows)]
    if added:
        query += (
            ", u AS (UPDATE conversation SET value_bytes = value_bytes + ? FROM g, b"
            " WHERE conversation.id = g.conversation_id)"
        )
        params.append(added)
    if data is not None:
        query += (
            ", kept AS (INSERT INTO blob (hash, data) SELECT ?, ? FROM b ON CONFLICT DO NOTHING)"
        )
        params += [digest, data]
    row = await db.row(query + " SELECT g.conversation_id, g.grown FROM g, b", params, last=True)
    if row is None:
        await refused(db, iteration_id, call.fence)
    return Running(str(row[0]), int(row[1])), added


async def chained_close(
    db: Sql, iteration_id: int, result: IterationWrite, fence: Fence | None
) -> Running:
    """Set the end of the running iteration ``iteration_id`` and index its blocks' code for
    search, in one statement; what it returns of its conversation.

    Raises:
        NotFound, Busy: as ``refused`` says (nothing written).
    """
    guard, guarded = iteration_guard(db, iteration_id, fence)
    indexed = db.dialect.index_insert(
        "SELECT closed.turn_id, 'code', b.code FROM closed"
        " JOIN block b ON b.iteration_id = closed.id ORDER BY b.position"
    )
    row = await db.row(
        "WITH g AS (SELECT i.id, i.turn_id, t.conversation_id,"
        " c.value_bytes - c.history_mark AS grown" + guard + "),"
        " closed AS (UPDATE iteration SET status = ?, parse_error = ?, refusal = ?,"
        " duration_ms = ? FROM g WHERE iteration.id = g.id RETURNING g.id, g.turn_id,"
        " g.conversation_id, g.grown),"
        f" indexed AS ({indexed})"
        " SELECT conversation_id, grown FROM closed",
        [*guarded, result.status, result.parse_error, result.refusal, result.duration_ms],
        last=True,
    )
    if row is None:
        await refused(db, iteration_id, fence)
    return Running(str(row[0]), int(row[1]))
