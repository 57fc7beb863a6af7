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
(``refused``), so a unit costs no statement for its checks.

Where the backend chains writes (PostgreSQL, ``Dialect.chains_writes``), each unit is one
statement as a rule — the guarded write with what depends on it as data-modifying ``WITH``
queries (the prompt's blob, a block's variable versions, the search index of a closing
iteration's code), each of which writes only when the guarded write does — so it costs one
round trip. A block with figures or sub-queries, a value stored in chunks and a closing that
records what was not recorded yet take their statements one by one, as on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence

from cove.errors import Busy, StoreError
from cove.persistence import history
from cove.persistence.blobs import blob_hash, put_blob
from cove.persistence.database import Call
from cove.persistence.fence import fence_condition
from cove.persistence.iteration_chains import chained_block, chained_close
from cove.persistence.iteration_rows import (
    close,
    insert_guarded_block,
    insert_units,
    iteration_guard,
    refused,
    running_iteration,
    write_reply,
)
from cove.persistence.records import IterationWrite, ReplyWrite, SubqueryWrite
from cove.persistence.search_index import index_blocks
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
    prompt = system_prompt.encode()
    condition, fenced = fence_condition(call.fence)
    async with call.writing() as db:
        insert = (
            "INSERT INTO iteration (turn_id, position, status, system_prompt_hash,"
            " request_message, context_message, seed, started_at)"
            " SELECT t.id, ?, 'running', ?, ?, ?, ?, ? FROM turn t"
            " JOIN conversation c ON c.id = t.conversation_id"
            " WHERE t.id = ? AND t.status = 'running'" + condition + db.dialect.lock("c")
        )
        params = [
            position,
            blob_hash(prompt),
            request_message,
            context_message,
            seed,
            call.now,
            turn_id,
            *fenced,
        ]
        if db.dialect.chains_writes:
            # The prompt's blob is kept by the same statement, and only if the iteration is.
            iteration_id = await db.value(
                f"WITH it AS ({insert} RETURNING id, system_prompt_hash),"
                " kept AS (INSERT INTO blob (hash, data) SELECT system_prompt_hash, ? FROM it"
                " ON CONFLICT DO NOTHING) SELECT id FROM it",
                [*params, prompt],
                last=True,
            )
        else:
            await put_blob(db, prompt)
            iteration_id = await db.value(insert + " RETURNING id", params, last=True)
        if iteration_id is None:
            conversation_id = await running_turn(db, turn_id, call.fence)  # raises: says why
            raise Busy(conversation_id, message=f"turn {turn_id} took no iteration")
        return int(iteration_id)


async def record_reply(call: Call, iteration_id: int, reply: ReplyWrite) -> None:
    """Record the model's reply (with its usage and planned blocks) as soon as it arrives.

    Raises:
        NotFound: unknown iteration.
        Busy: the iteration or its turn is no longer running.
    """
    async with call.writing() as db:
        guard, params = iteration_guard(db, iteration_id, call.fence)
        if not await write_reply(db, reply, " IN (SELECT i.id" + guard + ")", params, last=True):
            await refused(db, iteration_id, call.fence)


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
        if db.dialect.chains_writes and not block.figures and not subqueries:
            running, added = await chained_block(call, db, iteration_id, block, versions)
        else:
            block_id, running = await insert_guarded_block(db, iteration_id, block, call.fence)
            added = await insert_units(
                call,
                db,
                iteration_id,
                running,
                (),
                versions,
                subqueries,
                {block.position: block_id},
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
    unrecorded = result.blocks or result.var_versions or result.subqueries
    async with call.writing() as db:
        added = 0
        if db.dialect.chains_writes and not unrecorded and result.reply is None:
            running = await chained_close(db, iteration_id, result, call.fence)
        else:
            if unrecorded:
                # Checked first here: the versions need the conversation, and a stale write
                # must not fail on them instead.
                running = await running_iteration(db, iteration_id, call.fence)
                added = await insert_units(
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
                await write_reply(db, result.reply, " = ?", [iteration_id])
            running = await close(db, iteration_id, result, call.fence)
    if running.grown + added > call.history_budget:
        await history.keep_history(call, running.conversation_id)
