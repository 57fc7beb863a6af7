"""The write side of the store for iterations, one atomic unit at a time.

``start_iteration`` (the exact prompt, before the model is called), ``record_reply`` (as soon
as the reply arrives), ``record_block`` (each block with its variable versions and sub-queries,
as it finishes) and ``finish_iteration`` (status, and whatever was not recorded yet): each is
one store method and one write transaction, so a process killed mid-block leaves the reply, the
finished blocks and which block was running.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cove.codec.chunks import text_hash
from cove.errors import Busy, NotFound, StoreError
from cove.persistence import history, values
from cove.persistence.blobs import put_blob, put_encoded
from cove.persistence.database import Call
from cove.persistence.fence import Fence, refuse_stale
from cove.persistence.records import IterationWrite, ReplyWrite, SubqueryWrite
from cove.persistence.rows import figures_json
from cove.persistence.search_index import index_blocks
from cove.persistence.sql import Sql
from cove.persistence.writes import running_turn
from cove.results import BlockResult, VarVersion

ITERATION_END_STATUSES = frozenset({"ok", "error", "parse_error", "interrupted", "cancelled"})


async def start_iteration(
    call: Call,
    turn_id: int,
    position: int,
    *,
    system_prompt: str,
    request_message: str,
    context_message: str,
    seed: int | None = None,
) -> int:
    """Record a ``running`` iteration with its exact prompt and return its id.

    The system prompt is stored once, as a blob addressed by its hash.

    Raises:
        NotFound: unknown turn.
        Busy: the turn is no longer running (another process took the conversation over).
    """
    async with call.writing() as db:
        await running_turn(db, turn_id, call.fence)
        digest = await put_blob(db, system_prompt.encode())
        return int(
            await db.value(
                "INSERT INTO iteration (turn_id, position, status, system_prompt_hash,"
                " request_message, context_message, seed, started_at)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?) RETURNING id",
                (turn_id, position, digest, request_message, context_message, seed, call.now),
            )
        )


@dataclass(frozen=True)
class _Running:
    """A running iteration a unit writes to: its conversation, and by how many bytes the
    conversation's versions grew since its history was last measured."""

    conversation_id: str
    grown: int


async def _running_iteration(db: Sql, iteration_id: int, fence: Fence | None) -> _Running:
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
    return _Running(conversation_id, int(row[6]))


async def record_reply(call: Call, iteration_id: int, reply: ReplyWrite) -> None:
    """Record the model's reply (with its usage and planned blocks) as soon as it arrives.

    Raises:
        NotFound: unknown iteration.
        Busy: the iteration or its turn is no longer running.
    """
    async with call.writing() as db:
        await _running_iteration(db, iteration_id, call.fence)
        await _write_reply(db, iteration_id, reply)


async def _write_reply(db: Sql, iteration_id: int, reply: ReplyWrite) -> None:
    await db.run(
        "UPDATE iteration SET raw_reply = ?, thinking = ?, tokens_in = ?, tokens_out = ?,"
        " cost_usd = ?, llm_ms = ?, planned_blocks = ?, model = ? WHERE id = ?",
        (
            reply.raw_reply,
            reply.thinking,
            reply.usage.tokens_in,
            reply.usage.tokens_out,
            reply.usage.cost_usd,
            reply.llm_ms,
            json.dumps(list(reply.planned_blocks)),
            reply.model,
            iteration_id,
        ),
    )


async def record_block(
    call: Call,
    iteration_id: int,
    block: BlockResult,
    versions: Sequence[VarVersion] = (),
    subqueries: Sequence[SubqueryWrite] = (),
) -> None:
    """Record one finished block with its variable versions and sub-queries, atomically.

    A conversation whose versions grew past its history budget is thinned right after
    (``history.py``).

    Raises:
        NotFound: unknown iteration.
        Busy: the iteration or its turn is no longer running.
        StoreError: a version names another block, or a number is reused; nothing is written.
    """
    async with call.writing() as db:
        running = await _running_iteration(db, iteration_id, call.fence)
        added = await _insert_units(call, db, iteration_id, running, (block,), versions, subqueries)
    if running.grown + added > call.history_budget:
        await history.keep_history(call, running.conversation_id)


async def finish_iteration(call: Call, iteration_id: int, result: IterationWrite) -> None:
    """Close an iteration with what it has not recorded yet (blocks, versions, sub-queries).

    Blocks already recorded with ``record_block`` are not repeated; ``result.var_versions``
    may name them. The reply ``record_reply`` recorded stays as it is; ``result.reply`` is
    written only for one it did not record (a reply that could not be parsed).

    Raises:
        NotFound: unknown iteration.
        Busy: the iteration or its turn is no longer running.
        StoreError: the write is inconsistent (e.g. a variable version names a block the
            iteration does not have, or a version number is reused); nothing is written.
    """
    if result.status not in ITERATION_END_STATUSES:
        raise StoreError(f"{result.status!r} is not a finished iteration status")
    async with call.writing() as db:
        running = await _running_iteration(db, iteration_id, call.fence)
        added = await _insert_units(
            call, db, iteration_id, running, result.blocks, result.var_versions, result.subqueries
        )
        await index_blocks(db, "?", [iteration_id])  # while it still reads as running
        if result.reply is not None:
            await _write_reply(db, iteration_id, result.reply)
        await db.run(
            "UPDATE iteration SET status = ?, parse_error = ?, refusal = ?, duration_ms = ?"
            " WHERE id = ?",
            (result.status, result.parse_error, result.refusal, result.duration_ms, iteration_id),
        )
    if running.grown + added > call.history_budget:
        await history.keep_history(call, running.conversation_id)


async def _insert_units(
    call: Call,
    db: Sql,
    iteration_id: int,
    running: _Running,
    blocks: Sequence[BlockResult],
    versions: Sequence[VarVersion],
    subqueries: Sequence[SubqueryWrite],
) -> int:
    """Insert blocks, the variable versions they made and sub-queries of one iteration; the
    value bytes the versions added.

    Block code is not indexed for search here: ``finish_iteration`` (or whatever closes the
    iteration) indexes all its blocks at once (see ``search_index``).
    """
    block_ids = await _insert_blocks(db, iteration_id, blocks)
    added = 0
    if versions:
        added = await _insert_var_versions(
            call, db, iteration_id, running.conversation_id, versions, block_ids
        )
    if subqueries:
        await _insert_subqueries(db, iteration_id, subqueries)
    return added


async def _insert_blocks(
    db: Sql, iteration_id: int, blocks: Sequence[BlockResult]
) -> dict[int, int]:
    """Insert an iteration's blocks; returns the row id of each by block position."""
    block_ids: dict[int, int] = {}
    for block in blocks:
        inline, digest = await put_encoded(db, block.result_encoded)
        block_ids[block.position] = int(
            await db.value(
                "INSERT INTO block (iteration_id, position, code, ok, result_preview,"
                " result_encoded, result_blob, stdout, stderr, error, duration_ms, timed_out,"
                " seed, clock) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    iteration_id,
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
                ),
            )
        )
        await _insert_figures(db, block_ids[block.position], block)
    return block_ids


async def _insert_figures(db: Sql, block_id: int, block: BlockResult) -> None:
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


async def _block_id(db: Sql, iteration_id: int, var: VarVersion, block_ids: dict[int, int]) -> int:
    """The row id of the block that wrote ``var``: one just inserted, or one recorded earlier.

    Raises:
        StoreError: The iteration has no block at that position.
    """
    block_id = block_ids.get(var.block_position)
    if block_id is not None:
        return block_id
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


async def _insert_var_versions(
    call: Call,
    db: Sql,
    iteration_id: int,
    conversation_id: str,
    versions: Sequence[VarVersion],
    block_ids: dict[int, int],
) -> int:
    """Insert variable versions, each linked to the block that wrote it, with the chunks of
    their values the database lacks (``values.py``); the bytes those chunks added."""
    added = 0
    rows = []
    for var in versions:
        block_id = await _block_id(db, iteration_id, var, block_ids)
        inline, root, digest = None, None, None
        if var.encoded is not None:
            added += await values.put_chunks(db, var.chunks)
            inline, root, size = await values.put_root(db, var.encoded)
            added += size
            digest = text_hash(var.encoded)
        rows.append(
            (
                conversation_id,
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
                call.now,
            )
        )
    await db.run_many(
        "INSERT INTO var_version (conversation_id, name, version, block_id, kind,"
        " encoded, root_chunk, digest, type_name, preview, size, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    if added:
        await db.run(
            "UPDATE conversation SET value_bytes = value_bytes + ? WHERE id = ?",
            (added, conversation_id),
        )
    return added


async def _insert_subqueries(
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
