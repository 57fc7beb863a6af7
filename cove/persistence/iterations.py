"""The write side of the store for iterations, one atomic unit at a time.

``start_iteration`` (the exact prompt, before the model is called), ``record_reply`` (as soon
as the reply arrives), ``record_block`` (each block with its variable versions and sub-queries,
as it finishes) and ``finish_iteration`` (status, and whatever was not recorded yet): each is
one store method and one write transaction, so a process killed mid-block leaves the reply, the
finished blocks and which block was running.

Each unit checks that its iteration (and turn) still runs and that the turn's fence still holds
in the statement that writes: an ``INSERT … SELECT`` or ``UPDATE … WHERE id IN (SELECT …)`` over
the iteration, its turn and its conversation (whose row PostgreSQL locks until the unit
commits). A write that matches no row is refused, and only then does the unit read why
(``_refused``), so a unit costs no statement for its checks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from cove.codec.chunks import text_hash
from cove.errors import Busy, NotFound, StoreError
from cove.persistence import history, values
from cove.persistence.blobs import put_blob, put_encoded
from cove.persistence.database import Call
from cove.persistence.fence import Fence, fence_condition, refuse_stale
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
        digest = await put_blob(db, system_prompt.encode())
        condition, fenced = fence_condition(call.fence)
        iteration_id = await db.value(
            "INSERT INTO iteration (turn_id, position, status, system_prompt_hash,"
            " request_message, context_message, seed, started_at)"
            " SELECT t.id, ?, 'running', ?, ?, ?, ?, ? FROM turn t"
            " JOIN conversation c ON c.id = t.conversation_id"
            " WHERE t.id = ? AND t.status = 'running'"
            + condition
            + db.dialect.lock("c")
            + " RETURNING id",
            (position, digest, request_message, context_message, seed, call.now, turn_id, *fenced),
        )
        if iteration_id is None:
            conversation_id = await running_turn(db, turn_id, call.fence)  # raises: says why
            raise Busy(conversation_id, message=f"turn {turn_id} took no iteration")
        return int(iteration_id)


@dataclass(frozen=True)
class _Running:
    """A running iteration a unit writes to: its conversation, and by how many bytes the
    conversation's versions grew since its history was last measured."""

    conversation_id: str
    grown: int


def _guard(db: Sql, iteration_id: int, fence: Fence | None) -> tuple[str, list[Any]]:
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
#: how much its versions grew since its history was measured (``_Running``).
_RUNNING = (
    "(SELECT t.conversation_id FROM iteration i JOIN turn t ON t.id = i.turn_id"
    " WHERE i.id = {0}),"
    " (SELECT c.value_bytes - c.history_mark FROM iteration i JOIN turn t ON t.id = i.turn_id"
    " JOIN conversation c ON c.id = t.conversation_id WHERE i.id = {0})"
)


async def _refused(db: Sql, iteration_id: int, fence: Fence | None) -> NoReturn:
    """Raise what refused a guarded write to ``iteration_id`` (it matched no row).

    Raises:
        NotFound: unknown iteration.
        Busy: the fence is stale, or the iteration or its turn is no longer running.
    """
    running = await _running_iteration(db, iteration_id, fence)
    raise Busy(running.conversation_id, message=f"iteration {iteration_id} took no write")


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
        guard, params = _guard(db, iteration_id, call.fence)
        if not await _write_reply(db, reply, " IN (SELECT i.id" + guard + ")", params):
            await _refused(db, iteration_id, call.fence)


async def _write_reply(db: Sql, reply: ReplyWrite, where: str, params: Sequence[Any]) -> int:
    """Write ``reply`` to the iteration whose id is ``where`` (``= ?``, or ``IN (…)``); how many
    rows it changed."""
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
        block_id, running = await _insert_guarded_block(db, iteration_id, block, call.fence)
        added = await _insert_units(
            call, db, iteration_id, running, (), versions, subqueries, {block.position: block_id}
        )
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
        added = 0
        if result.blocks or result.var_versions or result.subqueries:
            # Checked first here: the versions need the conversation, and a stale write must
            # not fail on them instead.
            running = await _running_iteration(db, iteration_id, call.fence)
            added = await _insert_units(
                call,
                db,
                iteration_id,
                running,
                result.blocks,
                result.var_versions,
                result.subqueries,
            )
        await index_blocks(db, "?", [iteration_id])  # while it still reads as running
        if result.reply is not None:
            await _write_reply(db, result.reply, " = ?", [iteration_id])
        running = await _close(db, iteration_id, result, call.fence)
    if running.grown + added > call.history_budget:
        await history.keep_history(call, running.conversation_id)


async def _close(
    db: Sql, iteration_id: int, result: IterationWrite, fence: Fence | None
) -> _Running:
    """Set the iteration's end, guarded; what it returns of its conversation."""
    guard, params = _guard(db, iteration_id, fence)
    row = await db.row(
        "UPDATE iteration SET status = ?, parse_error = ?, refusal = ?, duration_ms = ?"
        " WHERE id IN (SELECT i.id" + guard + ") RETURNING " + _RUNNING.format("iteration.id"),
        (result.status, result.parse_error, result.refusal, result.duration_ms, *params),
    )
    if row is None:
        await _refused(db, iteration_id, fence)
    return _Running(str(row[0]), int(row[1]))


async def _insert_units(
    call: Call,
    db: Sql,
    iteration_id: int,
    running: _Running,
    blocks: Sequence[BlockResult],
    versions: Sequence[VarVersion],
    subqueries: Sequence[SubqueryWrite],
    inserted: dict[int, int] | None = None,
) -> int:
    """Insert blocks, the variable versions they made and sub-queries of one iteration; the
    value bytes the versions added. ``inserted`` names the row ids of blocks already inserted
    by position.

    Block code is not indexed for search here: ``finish_iteration`` (or whatever closes the
    iteration) indexes all its blocks at once (see ``search_index``).
    """
    block_ids = {**(inserted or {}), **await _insert_blocks(db, iteration_id, blocks)}
    added = 0
    if versions:
        added = await _insert_var_versions(
            call, db, iteration_id, running.conversation_id, versions, block_ids
        )
    if subqueries:
        await _insert_subqueries(db, iteration_id, subqueries)
    return added


_INSERT_BLOCK = (
    "INSERT INTO block (iteration_id, position, code, ok, result_preview, result_encoded,"
    " result_blob, stdout, stderr, error, duration_ms, timed_out, seed, clock)"
)


async def _block_fields(db: Sql, block: BlockResult) -> list[Any]:
    """A block's columns after ``iteration_id`` (a large result stored as a blob first)."""
    inline, digest = await put_encoded(db, block.result_encoded)
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


async def _insert_guarded_block(
    db: Sql, iteration_id: int, block: BlockResult, fence: Fence | None
) -> tuple[int, _Running]:
    """Insert a block of the running iteration ``iteration_id`` (refused as ``_refused`` says
    when it no longer runs or ``fence`` is stale); its row id and the iteration's conversation."""
    fields = await _block_fields(db, block)
    guard, params = _guard(db, iteration_id, fence)
    row = await db.row(
        _INSERT_BLOCK
        + " SELECT i.id, "
        + ", ".join("?" * len(fields))
        + guard
        + " RETURNING id, "
        + _RUNNING.format("block.iteration_id"),
        [*fields, *params],
    )
    if row is None:
        await _refused(db, iteration_id, fence)
    await _insert_figures(db, int(row[0]), block)
    return int(row[0]), _Running(str(row[1]), int(row[2]))


async def _insert_blocks(
    db: Sql, iteration_id: int, blocks: Sequence[BlockResult]
) -> dict[int, int]:
    """Insert an iteration's blocks; returns the row id of each by block position."""
    block_ids: dict[int, int] = {}
    for block in blocks:
        fields = await _block_fields(db, block)
        block_ids[block.position] = int(
            await db.value(
                _INSERT_BLOCK + " VALUES (?, " + ", ".join("?" * len(fields)) + ") RETURNING id",
                [iteration_id, *fields],
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
            inline, root, size = await values.put_value(db, var.chunks, var.encoded)
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
