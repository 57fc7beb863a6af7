"""The statements an iteration's units are made of (``iterations.py``): the guard that makes a
write land only while its iteration runs under the turn's fence, what a refused write reads to
say why, and the rows of blocks, figures, variable versions and sub-queries.

Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from cove.codec.chunks import text_hash
from cove.errors import Busy, NotFound, StoreError
from cove.persistence import values
from cove.persistence.blobs import put_blob, put_encoded
from cove.persistence.database import Call
from cove.persistence.fence import Fence, fence_condition, refuse_stale
from cove.persistence.records import IterationWrite, ReplyWrite, SubqueryWrite
from cove.persistence.rows import figures_json
from cove.persistence.sql import Sql
from cove.results import BlockResult, VarVersion


@dataclass(frozen=True)
class Running:
    """A running iteration a unit writes to: its conversation, and by how many bytes the
    conversation's versions grew since its history was last measured."""

    conversation_id: str
    grown: int


def iteration_guard(db: Sql, iteration_id: int, fence: Fence | None) -> tuple[str, list[Any]]:
    """``FROM … WHERE …`` selecting the iteration ``iteration_id`` (alias ``i``) while it and its
    turn run and ``fence`` holds, with its turn ``t`` and conversation ``c`` (row locked on
    PostgreSQL); and its parameters."""
    condition, fenced = fence_condition(fence)
    return (
        " FROM iteration i JOIN turn t ON t.id = i.turn_id"
        " JOIN conversation c ON c.id = t.conversation_id"
        " WHERE i.id = ? AND i.status = 'running' AND t.status = 'running'"
        + condition
        + db.dialect.lock("c"),
        [iteration_id, *fenced],
    )


#: What a guarded write returns beside its own columns: the iteration's conversation, and by
#: how much its versions grew since its history was measured (``Running``).
RUNNING = (
    "(SELECT t.conversation_id FROM iteration i JOIN turn t ON t.id = i.turn_id"
    " WHERE i.id = {0}),"
    " (SELECT c.value_bytes - c.history_mark FROM iteration i JOIN turn t ON t.id = i.turn_id"
    " JOIN conversation c ON c.id = t.conversation_id WHERE i.id = {0})"
)


async def refused(db: Sql, iteration_id: int, fence: Fence | None) -> NoReturn:
    """Raise what refused a guarded write to ``iteration_id`` (it matched no row).

    Raises:
        NotFound: unknown iteration.
        Busy: the fence is stale, or the iteration or its turn is no longer running.
    """
    running = await running_iteration(db, iteration_id, fence)
    raise Busy(running.conversation_id, message=f"iteration {iteration_id} took no write")


async def running_iteration(db: Sql, iteration_id: int, fence: Fence | None) -> Running:
    """The running iteration (of a running turn) ``iteration_id``, in one query, refusing a
    write whose fence is stale."""
    row = await db.row(
        "SELECT i.turn_id, i.status, t.status, t.conversation_id, c.lease_owner, c.lease_epoch,"
        " c.value_bytes - c.history_mark FROM iteration i JOIN turn t ON t.id = i.turn_id"
        " JOIN conversation c ON c.id = t.conversation_id WHERE i.id = ?" + db.dialect.lock("c"),
        (iteration_id,),
    )
    if row is None:
        raise NotFound("iteration", str(iteration_id))
    turn_id, status, turn_status, conversation_id = int(row[0]), row[1], row[2], str(row[3])
    refuse_stale(fence, conversation_id, row[4], row[5])
    if turn_status != "running":
        raise Busy(
            conversation_id,
            message=f"turn {turn_id} of conversation {conversation_id} is no longer running "
            f"(it is {turn_status}); another process may have taken the conversation over",
        )
    if status != "running":
        raise Busy(conversation_id, message=f"iteration {iteration_id} is already {status}")
    return Running(conversation_id, int(row[6]))


async def write_reply(
    db: Sql, reply: ReplyWrite, where: str, params: Sequence[Any], *, last: bool = False
) -> int:
    """Write ``reply`` to the iteration whose id is ``where`` (``= ?``, or ``IN (…)``); how many
    rows it changed. ``last``: the unit's last write."""
    return await db.run(
        "UPDATE iteration SET raw_reply = ?, thinking = ?, tokens_in = ?, tokens_out = ?,"
        " cost_usd = ?, llm_ms = ?, planned_blocks = ?, model = ? WHERE id" + where,
        (
            reply.raw_reply,
            reply.thinking,
            reply.usage.tokens_in,
            reply.usage.tokens_out,
            reply.usage.cost_usd,
            reply.llm_ms,
            json.dumps(list(reply.planned_blocks)),
            reply.model,
            *params,
        ),
        last=last,
    )


async def close(db: Sql, iteration_id: int, result: IterationWrite, fence: Fence | None) -> Running:
    """Set the iteration's end, guarded; what it returns of its conversation."""
    guard, params = iteration_guard(db, iteration_id, fence)
    row = await db.row(
        "UPDATE iteration SET status = ?, parse_error = ?, refusal = ?, duration_ms = ?"
        " WHERE id IN (SELECT i.id" + guard + ") RETURNING " + RUNNING.format("iteration.id"),
        (result.status, result.parse_error, result.refusal, result.duration_ms, *params),
    )
    if row is None:
        await refused(db, iteration_id, fence)
    return Running(str(row[0]), int(row[1]))


async def insert_units(
    call: Call,
    db: Sql,
    iteration_id: int,
    running: Running,
    blocks: Sequence[BlockResult],
    versions: Sequence[VarVersion],
    subqueries: Sequence[SubqueryWrite],
    inserted: dict[int, int | None] | None = None,
) -> int:
    """Insert blocks, the variable versions they made and sub-queries of one iteration; the
    value bytes the versions added. ``inserted`` names the row ids of blocks already inserted
    by position.

    Block code is not indexed for search here: ``finish_iteration`` (or whatever closes the
    iteration) indexes all its blocks at once (see ``search_index``).
    """
    block_ids: dict[int, int | None] = {
        **(inserted or {}),
        **await insert_blocks(db, iteration_id, blocks),
    }
    added = 0
    if versions:
        added = await insert_var_versions(
            call, db, iteration_id, running.conversation_id, versions, block_ids
        )
    if subqueries:
        await insert_subqueries(db, iteration_id, subqueries)
    return added


INSERT_BLOCK = (
    "INSERT INTO block (iteration_id, position, code, ok, result_preview, result_encoded,"
    " result_blob, stdout, stderr, error, duration_ms, timed_out, seed, clock)"
)


async def block_fields(db: Sql, block: BlockResult) -> list[Any]:
    """A block's columns after ``iteration_id`` (a large result stored as a blob first)."""
    inline, digest = await put_encoded(db, block.result_encoded)
    return block_columns(block, inline, digest)


def block_columns(block: BlockResult, inline: str | None, digest: str | None) -> list[Any]:
    """A block's columns after ``iteration_id``, its result inline or named by its blob."""
    return [
        block.position,
        block.code,
        block.ok,
        block.result_preview,
        inline,
        digest,
        block.stdout,
        block.stderr,
        block.error,
        block.duration_ms,
        block.timed_out,
        block.seed,
        block.clock,
    ]


async def insert_guarded_block(
    db: Sql, iteration_id: int, block: BlockResult, fence: Fence | None
) -> tuple[int, Running]:
    """Insert a block of the running iteration ``iteration_id`` (refused as ``refused`` says
    when it no longer runs or ``fence`` is stale); its row id and the iteration's conversation."""
    fields = await block_fields(db, block)
    guard, params = iteration_guard(db, iteration_id, fence)
    row = await db.row(
        INSERT_BLOCK
        + " SELECT i.id, "
        + ", ".join("?" * len(fields))
        + guard
        + " RETURNING id, "
        + RUNNING.format("block.iteration_id"),
        [*fields, *params],
    )
    if row is None:
        await refused(db, iteration_id, fence)
    await insert_figures(db, int(row[0]), block)
    return int(row[0]), Running(str(row[1]), int(row[2]))


async def insert_blocks(
    db: Sql, iteration_id: int, blocks: Sequence[BlockResult]
) -> dict[int, int]:
    """Insert an iteration's blocks; returns the row id of each by block position."""
    block_ids: dict[int, int] = {}
    for block in blocks:
        fields = await block_fields(db, block)
        block_ids[block.position] = int(
            await db.value(
                INSERT_BLOCK + " VALUES (?, " + ", ".join("?" * len(fields)) + ") RETURNING id",
                [iteration_id, *fields],
            )
        )
        await insert_figures(db, block_ids[block.position], block)
    return block_ids


async def insert_figures(db: Sql, block_id: int, block: BlockResult) -> None:
    """Keep a block's figures: the PNGs as blobs, their descriptions on the block row."""
    if not block.figures:
        return
    for figure in block.figures:
        if figure.png is None:
            raise StoreError("a figure to record has no PNG")
        digest = await put_blob(db, figure.png)
        await db.run(
            "INSERT INTO block_figure (block_id, position, digest) VALUES (?, ?, ?)",
            (block_id, figure.position, digest),
        )
    await db.run(
        "UPDATE block SET figures = ? WHERE id = ?", (figures_json(block.figures), block_id)
    )


async def _block_id(
    db: Sql, iteration_id: int, var: VarVersion, block_ids: dict[int, int | None]
) -> int | None:
    """The row id of the block that wrote ``var``: one just inserted (None: the one the same
    statement inserts), or one recorded earlier.

    Raises:
        StoreError: The iteration has no block at that position.
    """
    if var.block_position in block_ids:
        return block_ids[var.block_position]
    found = await db.value(
        "SELECT id FROM block WHERE iteration_id = ? AND position = ?",
        (iteration_id, var.block_position),
    )
    if found is None:
        raise StoreError(
            f"variable {var.name!r} v{var.version} names block {var.block_position}, "
            f"which is not part of iteration {iteration_id}"
        )
    block_ids[var.block_position] = int(found)
    return int(found)


@dataclass(frozen=True)
class VersionRow:
    """A variable version as its ``var_version`` row holds it, but for its conversation and
    time (the unit's). ``block_id`` None: the block the same statement inserts."""

    name: str
    version: int
    block_id: int | None
    kind: str
    encoded: str | None
    root_chunk: int | None
    digest: str | None
    type_name: str
    preview: str
    size: int | None


async def version_rows(
    db: Sql,
    iteration_id: int,
    versions: Sequence[VarVersion],
    block_ids: dict[int, int | None],
) -> tuple[list[VersionRow], int]:
    """The rows of ``versions``, each linked to the block that wrote it, with the chunks of
    their values the database lacks kept first (``values.py``); and the bytes those added."""
    added = 0
    rows = []
    for var in versions:
        block_id = await _block_id(db, iteration_id, var, block_ids)
        inline, root, digest = None, None, None
        if var.encoded is not None:
            inline, root, size = await values.put_value(db, var.chunks, var.encoded)
            added += size
            digest = text_hash(var.encoded)
        rows.append(
            VersionRow(
                var.name,
                var.version,
                block_id,
                var.kind,
                inline,
                root,
                digest,
                var.type_name,
                var.preview,
                var.size,
            )
        )
    return rows, added


async def insert_var_versions(
    call: Call,
    db: Sql,
    iteration_id: int,
    conversation_id: str,
    versions: Sequence[VarVersion],
    block_ids: dict[int, int | None],
) -> int:
    """Insert variable versions, each linked to the block that wrote it, with the chunks of
    their values the database lacks (``values.py``); the bytes those chunks added."""
    rows, added = await version_rows(db, iteration_id, versions, block_ids)
    await db.run_many(
        "INSERT INTO var_version (conversation_id, name, version, block_id, kind,"
        " encoded, root_chunk, digest, type_name, preview, size, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                conversation_id,
                row.name,
                row.version,
                row.block_id,
                row.kind,
                row.encoded,
                row.root_chunk,
                row.digest,
                row.type_name,
                row.preview,
                row.size,
                call.now,
            )
            for row in rows
        ],
    )
    if added:
        await db.run(
            "UPDATE conversation SET value_bytes = value_bytes + ? WHERE id = ?",
            (added, conversation_id),
        )
    return added


async def insert_subqueries(
    db: Sql, iteration_id: int, subqueries: Sequence[SubqueryWrite]
) -> None:
    """Insert an iteration's ``llm_query`` sub-queries."""
    await db.run_many(
        "INSERT INTO subquery (iteration_id, block_position, position, prompt, reply, model,"
        " tokens_in, tokens_out, cost_usd, duration_ms, error)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                iteration_id,
                sub.block_position,
                sub.position,
                sub.prompt,
                sub.reply,
                sub.model,
                sub.usage.tokens_in,
                sub.usage.tokens_out,
                sub.usage.cost_usd,
                sub.duration_ms,
                sub.error,
            )
            for sub in subqueries
        ],
    )
