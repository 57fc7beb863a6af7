"""The write side of the store: each function is one ``BEGIN IMMEDIATE`` transaction.

They run synchronously on the store's connection thread, so a whole write unit (an iteration
with its blocks, variable versions, sub-queries, blobs and search rows) costs one hop to that
thread and one commit.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from cove.codec.chunks import text_hash
from cove.errors import Busy, CoveError, NotFound, StoreError
from cove.events import FINAL_STATUSES
from cove.persistence import cancels, history, reads, values
from cove.persistence.chain import last_position
from cove.persistence.connection import collect_blobs, immediate, put_blob, put_encoded
from cove.persistence.fence import Fence, check_fence
from cove.persistence.records import (
    ConversationRecord,
    IterationWrite,
    ModelOption,
    ReplyWrite,
    SubqueryWrite,
    TurnRecord,
)
from cove.persistence.rows import figures_json
from cove.persistence.search_index import index_blocks, index_text
from cove.persistence.totals import RECORDED_TOTALS
from cove.results import BlockResult, TurnOutcome, VarVersion

ITERATION_END_STATUSES = frozenset({"ok", "error", "parse_error", "interrupted", "cancelled"})


def create_conversation(
    conn: sqlite3.Connection,
    now: float,
    channel: str,
    title: str | None,
    external_id: str | None,
    parent_id: str | None,
    fork_turn: int | None,
    workspace: str | None,
    owner: str | None = None,
) -> ConversationRecord:
    """Insert a conversation (a fork when ``parent_id`` is given) and return it."""
    if (parent_id is None) != (fork_turn is None):
        raise StoreError("a fork needs both parent_id and fork_turn")
    conversation_id = uuid.uuid4().hex
    with immediate(conn):
        if parent_id is not None and fork_turn is not None:
            seen = last_position(conn, parent_id)
            if not 0 <= fork_turn <= seen:
                raise StoreError(
                    f"cannot fork conversation {parent_id} at turn {fork_turn}: "
                    f"it has turns 1..{seen}"
                )
        if external_id is not None:
            existing = reads.find_external(conn, channel, external_id)
            if existing is not None:
                raise StoreError(
                    f"channel {channel!r} already has conversation {existing.id} "
                    f"for external id {external_id!r}"
                )
        conn.execute(
            "INSERT INTO conversation (id, channel, external_id, title, parent_id, fork_turn,"
            " workspace, created_at, updated_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                conversation_id,
                channel,
                external_id,
                title,
                parent_id,
                fork_turn,
                workspace,
                now,
                now,
                owner,
            ),
        )
    return reads.get_conversation(conn, conversation_id)


def set_title(
    conn: sqlite3.Connection,
    now: float,
    conversation_id: str,
    title: str,
    fence: Fence | None = None,
) -> None:
    """Rename a conversation."""
    with immediate(conn):
        check_fence(conn, fence, conversation_id)
        cursor = conn.execute(
            "UPDATE conversation SET title = ?, updated_at = ? WHERE id = ?",
            (title, now, conversation_id),
        )
        if cursor.rowcount == 0:
            raise NotFound("conversation", conversation_id)


def start_turn(
    conn: sqlite3.Connection,
    now: float,
    conversation_id: str,
    request: str,
    model: str | None,
    attachments: Sequence[tuple[str, int]] = (),
    model_options: Mapping[str, ModelOption] | None = None,
    fence: Fence | None = None,
    cost_known: bool = True,
) -> TurnRecord:
    """Record a new ``running`` turn after the last one the conversation sees."""
    files = json.dumps([list(item) for item in attachments]) if attachments else None
    options = json.dumps(dict(model_options)) if model_options else None
    with immediate(conn):
        check_fence(conn, fence, conversation_id)
        position = last_position(conn, conversation_id) + 1
        cursor = conn.execute(
            "INSERT INTO turn (conversation_id, position, request, status, model, started_at,"
            " attachments, model_options, cost_known) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            (conversation_id, position, request, model, now, files, options, cost_known),
        )
        turn_id = int(cursor.lastrowid or 0)
        index_text(conn, turn_id, "request", request)
        conn.execute("UPDATE conversation SET updated_at = ? WHERE id = ?", (now, conversation_id))
    return reads.get_turn(conn, turn_id)


def _running_turn(conn: sqlite3.Connection, turn_id: int, fence: Fence | None = None) -> str:
    """Return the turn's conversation id, refusing a turn that is no longer running.

    A ``fence`` that is no longer the conversation's lease refuses the write first.
    """
    row = conn.execute(
        "SELECT conversation_id, status FROM turn WHERE id = ?", (turn_id,)
    ).fetchone()
    if row is None:
        raise NotFound("turn", str(turn_id))
    conversation_id, status = row
    check_fence(conn, fence, conversation_id)
    if status != "running":
        raise Busy(
            conversation_id,
            message=f"turn {turn_id} of conversation {conversation_id} is no longer running "
            f"(it is {status}); another process may have taken the conversation over",
        )
    return str(conversation_id)


def start_iteration(
    conn: sqlite3.Connection,
    now: float,
    turn_id: int,
    position: int,
    system_prompt: str,
    request_message: str,
    context_message: str,
    seed: int | None,
    fence: Fence | None = None,
) -> int:
    """Record a ``running`` iteration with its exact prompt; return its id."""
    with immediate(conn):
        _running_turn(conn, turn_id, fence)
        digest = put_blob(conn, system_prompt.encode())
        cursor = conn.execute(
            "INSERT INTO iteration (turn_id, position, status, system_prompt_hash,"
            " request_message, context_message, seed, started_at)"
            " VALUES (?, ?, 'running', ?, ?, ?, ?, ?)",
            (turn_id, position, digest, request_message, context_message, seed, now),
        )
        return int(cursor.lastrowid or 0)


def _running_iteration(
    conn: sqlite3.Connection, iteration_id: int, fence: Fence | None = None
) -> tuple[int, str]:
    """Return (turn id, conversation id) of a running iteration of a running turn."""
    row = conn.execute(
        "SELECT turn_id, status FROM iteration WHERE id = ?", (iteration_id,)
    ).fetchone()
    if row is None:
        raise NotFound("iteration", str(iteration_id))
    turn_id, status = row
    conversation_id = _running_turn(conn, turn_id, fence)
    if status != "running":
        raise Busy(conversation_id, message=f"iteration {iteration_id} is already {status}")
    return int(turn_id), conversation_id


def record_reply(
    conn: sqlite3.Connection, iteration_id: int, reply: ReplyWrite, fence: Fence | None = None
) -> None:
    """Record the model's reply the moment it arrives, before any of its blocks runs."""
    with immediate(conn):
        _running_iteration(conn, iteration_id, fence)
        _write_reply(conn, iteration_id, reply)


def _write_reply(conn: sqlite3.Connection, iteration_id: int, reply: ReplyWrite) -> None:
    conn.execute(
        "UPDATE iteration SET raw_reply = ?, thinking = ?, tokens_in = ?, tokens_out = ?,"
        " cost_usd = ?, llm_ms = ?, planned_blocks = ? WHERE id = ?",
        (
            reply.raw_reply,
            reply.thinking,
            reply.usage.tokens_in,
            reply.usage.tokens_out,
            reply.usage.cost_usd,
            reply.llm_ms,
            json.dumps(list(reply.planned_blocks)),
            iteration_id,
        ),
    )


def record_block(
    conn: sqlite3.Connection,
    now: float,
    iteration_id: int,
    block: BlockResult,
    versions: Sequence[VarVersion],
    subqueries: Sequence[SubqueryWrite],
    fence: Fence | None = None,
    budget: int | None = None,
) -> str | None:
    """Record one finished block with the variable versions and sub-queries it made.

    Returns the conversation's id when its history budget (``budget`` bytes) is due for a check
    (``history.py``), else None.
    """
    with immediate(conn):
        turn_id, conversation_id = _running_iteration(conn, iteration_id, fence)
        _insert_units(
            conn, now, iteration_id, turn_id, conversation_id, (block,), versions, subqueries
        )
        return _due(conn, conversation_id, versions, budget)


def _due(
    conn: sqlite3.Connection,
    conversation_id: str,
    versions: Sequence[VarVersion],
    budget: int | None,
) -> str | None:
    if budget is None or not versions or not history.due(conn, conversation_id, budget):
        return None
    return conversation_id


def finish_iteration(
    conn: sqlite3.Connection,
    now: float,
    iteration_id: int,
    result: IterationWrite,
    fence: Fence | None = None,
    budget: int | None = None,
) -> str | None:
    """Close an iteration with whatever it has not recorded yet, atomically.

    Returns the conversation's id when its history budget is due for a check (as
    ``record_block``), else None.
    """
    if result.status not in ITERATION_END_STATUSES:
        raise StoreError(f"{result.status!r} is not a finished iteration status")
    with immediate(conn):
        turn_id, conversation_id = _running_iteration(conn, iteration_id, fence)
        _insert_units(
            conn,
            now,
            iteration_id,
            turn_id,
            conversation_id,
            result.blocks,
            result.var_versions,
            result.subqueries,
        )
        index_blocks(conn, "?", [iteration_id])  # while it still reads as running
        _close_iteration(conn, iteration_id, result)
        return _due(conn, conversation_id, result.var_versions, budget)


def _close_iteration(conn: sqlite3.Connection, iteration_id: int, result: IterationWrite) -> None:
    """Set a finished iteration's status and duration; its reply only when ``record_reply``
    did not record one (``result.reply``)."""
    if result.reply is not None:
        _write_reply(conn, iteration_id, result.reply)
    conn.execute(
        "UPDATE iteration SET status = ?, parse_error = ?, refusal = ?, duration_ms = ?"
        " WHERE id = ?",
        (result.status, result.parse_error, result.refusal, result.duration_ms, iteration_id),
    )


def _insert_units(
    conn: sqlite3.Connection,
    now: float,
    iteration_id: int,
    turn_id: int,
    conversation_id: str,
    blocks: Sequence[BlockResult],
    versions: Sequence[VarVersion],
    subqueries: Sequence[SubqueryWrite],
) -> None:
    """Insert blocks, the variable versions they made and sub-queries of one iteration.

    Block code is not indexed for search here: ``finish_iteration`` (or whatever closes the
    iteration) indexes all its blocks at once (see ``search_index``).
    """
    block_ids = _insert_blocks(conn, iteration_id, blocks)
    _insert_var_versions(conn, now, iteration_id, conversation_id, versions, block_ids)
    _insert_subqueries(conn, iteration_id, subqueries)


def _insert_blocks(
    conn: sqlite3.Connection, iteration_id: int, blocks: Sequence[BlockResult]
) -> dict[int, int]:
    """Insert an iteration's blocks; returns the row id of each by block position."""
    block_ids: dict[int, int] = {}
    for block in blocks:
        inline, digest = put_encoded(conn, block.result_encoded)
        cursor = conn.execute(
            "INSERT INTO block (iteration_id, position, code, ok, result_preview,"
            " result_encoded, result_blob, stdout, stderr, error, duration_ms, timed_out,"
            " seed, clock) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        block_ids[block.position] = int(cursor.lastrowid or 0)
        _insert_figures(conn, block_ids[block.position], block)
    return block_ids


def _insert_figures(conn: sqlite3.Connection, block_id: int, block: BlockResult) -> None:
    """Keep a block's figures: the PNGs as blobs, their descriptions on the block row."""
    if not block.figures:
        return
    for figure in block.figures:
        if figure.png is None:
            raise StoreError("a figure to record has no PNG")
        digest = put_blob(conn, figure.png)
        conn.execute(
            "INSERT INTO block_figure (block_id, position, digest) VALUES (?, ?, ?)",
            (block_id, figure.position, digest),
        )
    conn.execute(
        "UPDATE block SET figures = ? WHERE id = ?", (figures_json(block.figures), block_id)
    )


def _block_id(
    conn: sqlite3.Connection, iteration_id: int, var: VarVersion, block_ids: dict[int, int]
) -> int:
    """The row id of the block that wrote ``var``: one just inserted, or one recorded earlier.

    Raises:
        StoreError: The iteration has no block at that position.
    """
    block_id = block_ids.get(var.block_position)
    if block_id is not None:
        return block_id
    row = conn.execute(
        "SELECT id FROM block WHERE iteration_id = ? AND position = ?",
        (iteration_id, var.block_position),
    ).fetchone()
    if row is None:
        raise StoreError(
            f"variable {var.name!r} v{var.version} names block {var.block_position}, "
            f"which is not part of iteration {iteration_id}"
        )
    block_ids[var.block_position] = int(row[0])
    return int(row[0])


def _insert_var_versions(
    conn: sqlite3.Connection,
    now: float,
    iteration_id: int,
    conversation_id: str,
    versions: Sequence[VarVersion],
    block_ids: dict[int, int],
) -> None:
    """Insert variable versions, each linked to the block that wrote it, with the chunks of
    their values the database lacks (``values.py``)."""
    added = 0
    for var in versions:
        block_id = _block_id(conn, iteration_id, var, block_ids)
        inline, root, digest = None, None, None
        if var.encoded is not None:
            added += values.put_chunks(conn, var.chunks)
            inline, root, size = values.put_root(conn, var.encoded)
            added += size
            digest = text_hash(var.encoded)
        conn.execute(
            "INSERT INTO var_version (conversation_id, name, version, block_id, kind,"
            " encoded, root_chunk, digest, type_name, preview, size, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                now,
            ),
        )
    if added:
        conn.execute(
            "UPDATE conversation SET value_bytes = value_bytes + ? WHERE id = ?",
            (added, conversation_id),
        )


def _insert_subqueries(
    conn: sqlite3.Connection, iteration_id: int, subqueries: Sequence[SubqueryWrite]
) -> None:
    """Insert an iteration's ``llm_query`` sub-queries."""
    conn.executemany(
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


def finish_turn(
    conn: sqlite3.Connection,
    now: float,
    turn_id: int,
    outcome: TurnOutcome,
    fence: Fence | None = None,
) -> TurnRecord:
    """Close a running turn with its outcome; iterations it left running end with it."""
    status, usage = outcome.status, outcome.usage
    if status not in FINAL_STATUSES:
        raise StoreError(f"{status!r} is not a finished turn status")
    with immediate(conn):
        conversation_id = _running_turn(conn, turn_id, fence)
        conn.execute(
            "UPDATE turn SET status = ?, answer = ?, confidence = ?, tokens_in = ?,"
            " tokens_out = ?, cost_usd = ?, finished_at = ?, error = ? WHERE id = ?",
            (
                status,
                outcome.answer,
                outcome.confidence,
                usage.tokens_in,
                usage.tokens_out,
                usage.cost_usd,
                now,
                outcome.error,
                turn_id,
            ),
        )
        # Totals are never less than what the recorded iterations and sub-queries used (a
        # failed or cancelled turn included), the same sums crash recovery writes.
        conn.execute(f"UPDATE turn SET {RECORDED_TOTALS} WHERE id = ?", (turn_id,))
        leftover = "cancelled" if status == "cancelled" else "interrupted"
        index_blocks(conn, "SELECT id FROM iteration WHERE turn_id = ?", [turn_id])
        conn.execute(
            "UPDATE iteration SET status = ? WHERE turn_id = ? AND status = 'running'",
            (leftover, turn_id),
        )
        if outcome.answer:
            index_text(conn, turn_id, "answer", outcome.answer)
        cancels.clear(conn, "?", [turn_id])  # a stop asked of it is answered by its end
        conn.execute("UPDATE conversation SET updated_at = ? WHERE id = ?", (now, conversation_id))
    return reads.get_turn(conn, turn_id)


def delete_conversation(
    conn: sqlite3.Connection, now: float, conversation_id: str, lease_owner: str | None
) -> None:
    """Delete a conversation with everything it wrote, then the blobs nobody uses any more.

    Its versions' value chunks are released in the same transaction; ``values.collect`` deletes
    those nothing else holds, in transactions of their own.

    Refused while another owner holds a live lease on it: a turn is running there.
    """
    with immediate(conn):
        record = reads.get_conversation(conn, conversation_id)
        holder, until = record.lease_owner, record.lease_until
        if holder is not None and holder != lease_owner and until is not None and until > now:
            raise Busy(
                conversation_id,
                holder,
                message=f"conversation {conversation_id} cannot be deleted: another cove process "
                f"is running a turn in it (lease held by {holder}); try again when it finishes",
            )
        forks = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM conversation WHERE parent_id = ? ORDER BY created_at",
                (conversation_id,),
            )
        ]
        if forks:
            raise CoveError(
                f"conversation {conversation_id} cannot be deleted: it has forks "
                f"({', '.join(forks)}); delete them first"
            )
        owned: list[Any] = [conversation_id] * 4
        candidates = {
            row[0]
            for row in conn.execute(
                """
                SELECT i.system_prompt_hash FROM iteration i JOIN turn t ON t.id = i.turn_id
                WHERE t.conversation_id = ?
                UNION SELECT b.result_blob FROM block b
                JOIN iteration i ON i.id = b.iteration_id JOIN turn t ON t.id = i.turn_id
                WHERE t.conversation_id = ? AND b.result_blob IS NOT NULL
                UNION SELECT encoded_blob FROM var_version
                WHERE conversation_id = ? AND encoded_blob IS NOT NULL
                UNION SELECT f.digest FROM block_figure f JOIN block b ON b.id = f.block_id
                JOIN iteration i ON i.id = b.iteration_id JOIN turn t ON t.id = i.turn_id
                WHERE t.conversation_id = ?
                """,
                owned,
            )
        }
        values.release_roots(conn, "v.conversation_id = ?", [conversation_id])
        # Foreign keys cascade to turns, iterations, blocks, variable versions, sub-queries
        # and search rows (whose trigger removes the FTS entries).
        conn.execute("DELETE FROM conversation WHERE id = ?", (conversation_id,))
        collect_blobs(conn, candidates)


def add_steering(
    conn: sqlite3.Connection,
    now: float,
    iteration_id: int,
    texts: list[str],
    fence: Fence | None = None,
) -> None:
    """Record the person's messages that iteration ``iteration_id`` showed the model."""
    with immediate(conn):
        row = conn.execute(
            "SELECT t.conversation_id FROM iteration i JOIN turn t ON t.id = i.turn_id"
            " WHERE i.id = ?",
            (iteration_id,),
        ).fetchone()
        if row is None:
            raise NotFound("iteration", str(iteration_id))
        check_fence(conn, fence, row[0])
        start = conn.execute(
            "SELECT coalesce(max(position) + 1, 0) FROM steering WHERE iteration_id = ?",
            (iteration_id,),
        ).fetchone()[0]
        conn.executemany(
            "INSERT INTO steering (iteration_id, position, text, created_at) VALUES (?, ?, ?, ?)",
            [(iteration_id, start + i, text, now) for i, text in enumerate(texts)],
        )
