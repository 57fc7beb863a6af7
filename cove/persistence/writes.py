"""The write side of the store for conversations and turns: each public function is one store
method and one write transaction (iterations are ``iterations.py``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cove.errors import Busy, CoveError, NotFound, StoreError
from cove.events import FINAL_STATUSES
from cove.persistence import cancels, reads, rows, values
from cove.persistence.blobs import collect_blobs
from cove.persistence.chain import last_position
from cove.persistence.database import Call
from cove.persistence.fence import Fence, check_fence, fence_condition, refuse_stale
from cove.persistence.records import ConversationRecord, ModelOption, TurnRecord
from cove.persistence.rows import TURN_COLUMNS
from cove.persistence.search_index import index_blocks, index_text
from cove.persistence.sql import Sql
from cove.persistence.totals import recorded_totals
from cove.results import TurnOutcome

#: Random ids tried for one ``id_wanted`` (each process of N is home to 1 in N of them).
ID_TRIES = 256


def new_conversation_id(wanted: Callable[[str], bool] | None = None) -> str:
    """A random conversation id, one ``wanted`` accepts if one of ``ID_TRIES`` is."""
    for _ in range(ID_TRIES - 1):
        candidate = uuid.uuid4().hex
        if wanted is None or wanted(candidate):
            return candidate
    return uuid.uuid4().hex


async def create_conversation(
    call: Call,
    *,
    channel: str,
    title: str | None = None,
    external_id: str | None = None,
    parent_id: str | None = None,
    fork_turn: int | None = None,
    workspace: str | None = None,
    owner: str | None = None,
    id_wanted: Callable[[str], bool] | None = None,
) -> ConversationRecord:
    """Create a conversation; with ``parent_id`` and ``fork_turn``, a fork.

    ``owner`` is the principal a channel acts for (None: no owner, the local user).
    ``id_wanted``, when given, picks the new id among random ones (several processes serving
    by affinity: an id whose turns run in the process creating it).

    Raises:
        NotFound: the parent does not exist.
        StoreError: the fork point is outside the parent's turns, or the channel already
            has a conversation with this ``external_id``.
    """
    if (parent_id is None) != (fork_turn is None):
        raise StoreError("a fork needs both parent_id and fork_turn")
    conversation_id = new_conversation_id(id_wanted)
    async with call.writing() as db:
        if parent_id is not None and fork_turn is not None:
            seen = await last_position(db, parent_id)
            if not 0 <= fork_turn <= seen:
                raise StoreError(
                    f"cannot fork conversation {parent_id} at turn {fork_turn}: "
                    f"it has turns 1..{seen}"
                )
        if external_id is not None:
            existing = await reads.external(db, channel, external_id)
            if existing is not None:
                raise StoreError(
                    f"channel {channel!r} already has conversation {existing.id} "
                    f"for external id {external_id!r}"
                )
        await db.run(
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
                call.now,
                call.now,
                owner,
            ),
        )
        return await reads.conversation(db, conversation_id)


async def set_title(call: Call, conversation_id: str, title: str) -> None:
    """Set a conversation's title. Raises ``NotFound``."""
    async with call.writing() as db:
        await check_fence(db, call.fence, conversation_id)
        changed = await db.run(
            "UPDATE conversation SET title = ?, updated_at = ? WHERE id = ?",
            (title, call.now, conversation_id),
        )
        if changed == 0:
            raise NotFound("conversation", conversation_id)


async def start_turn(
    call: Call,
    conversation_id: str,
    request: str,
    *,
    model: str | None = None,
    attachments: Sequence[tuple[str, int]] = (),
    model_options: Mapping[str, ModelOption] | None = None,
    cost_known: bool = True,
    delivery: str | None = None,
) -> TurnRecord:
    """Record a ``running`` turn after the last turn the conversation sees.

    A fork's first own turn is ``fork_turn + 1``. ``attachments`` are the ``(name, size)``
    of the files attached to the request; ``model_options`` the options its model calls
    are sent with; ``cost_known`` False when the model has no price (its cost is unknown);
    ``delivery`` the name of the kept delivery the turn answers (``inbox.py``), recorded with
    the turn. Raises ``NotFound``.
    """
    files = json.dumps([list(item) for item in attachments]) if attachments else None
    options = json.dumps(dict(model_options)) if model_options else None
    async with call.writing() as db:
        # The conversation's row first: its update checks the fence (and locks the row on
        # PostgreSQL until the turn is in).
        condition, fenced = fence_condition(call.fence, "conversation")
        if not await db.run(
            "UPDATE conversation SET updated_at = ? WHERE id = ?" + condition,
            (call.now, conversation_id, *fenced),
        ):
            await check_fence(db, call.fence, conversation_id)  # raises: says why
            raise NotFound("conversation", conversation_id)
        position = await last_position(db, conversation_id) + 1
        insert = (
            "INSERT INTO turn (conversation_id, position, request, status, model,"
            " started_at, attachments, model_options, cost_known, delivery)"
            " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?) RETURNING "
        )
        params = [
            *(conversation_id, position, request, model, call.now),
            *(files, options, cost_known, delivery),
        ]
        if db.dialect.chains_writes:
            # The request is indexed for search by the statement that inserts the turn.
            indexed = db.dialect.index_insert("SELECT t.id, 'request', t.request FROM t")
            row = await db.row(
                f"WITH t AS ({insert}*), indexed AS ({indexed}) SELECT {TURN_COLUMNS} FROM t",
                params,
                last=True,
            )
            return rows.turn(row)
        turn_id = int(await db.value(insert + "id", params))
        await index_text(db, turn_id, "request", request)
        return await reads.turn(db, turn_id)


async def running_turn(db: Sql, turn_id: int, fence: Fence | None) -> str:
    """Return the turn's conversation id, refusing a turn that is no longer running.

    A ``fence`` that is no longer the conversation's lease refuses the write first. One query
    (which on PostgreSQL locks the conversation's row until the unit commits).
    """
    row = await db.row(
        "SELECT t.conversation_id, t.status, c.lease_owner, c.lease_epoch FROM turn t"
        " JOIN conversation c ON c.id = t.conversation_id WHERE t.id = ?" + db.dialect.lock("c"),
        (turn_id,),
    )
    if row is None:
        raise NotFound("turn", str(turn_id))
    conversation_id, status = str(row[0]), row[1]
    refuse_stale(fence, conversation_id, row[2], row[3])
    if status != "running":
        raise Busy(
            conversation_id,
            message=f"turn {turn_id} of conversation {conversation_id} is no longer running "
            f"(it is {status}); another process may have taken the conversation over",
        )
    return conversation_id


async def finish_turn(
    call: Call, turn_id: int, outcome: TurnOutcome, *, cost_known: bool = True
) -> TurnRecord:
    """Close a running turn with its outcome and return it; iterations it left running end
    with it. ``cost_known`` False: a model that answered had no price (the turn's cost is
    unknown, whatever ``start_turn`` was told).

    Raises:
        NotFound: unknown turn.
        Busy: the turn is no longer running.
        StoreError: ``status`` is not a finished turn status.
    """
    status, usage = outcome.status, outcome.usage
    if status not in FINAL_STATUSES:
        raise StoreError(f"{status!r} is not a finished turn status")
    leftover = "cancelled" if status == "cancelled" else "interrupted"
    async with call.writing() as db:
        # Totals are never less than what the recorded iterations and sub-queries used (a
        # failed or cancelled turn included), the same sums crash recovery writes. The turn
        # must still run under the caller's fence: checked by the update itself.
        condition, fenced = fence_condition(call.fence)
        update = (
            "UPDATE turn SET status = ?, answer = ?, confidence = ?, finished_at = ?, error = ?, "
            "cost_known = cost_known * ?, "
            + recorded_totals(db.dialect, given=True)
            + " WHERE id IN (SELECT t.id FROM turn t JOIN conversation c"
            " ON c.id = t.conversation_id WHERE t.id = ? AND t.status = 'running'"
            + condition
            + db.dialect.lock("c")
            + ")"
        )
        params = [
            status,
            outcome.answer,
            outcome.confidence,
            call.now,
            outcome.error,
            int(cost_known),
            usage.tokens_in,
            usage.tokens_out,
            usage.cost_usd,
            turn_id,
            *fenced,
        ]
        if db.dialect.chains_writes:
            row = await db.row(
                _chained_finish(db, update, bool(outcome.answer)),
                [*params, leftover, *([outcome.answer] if outcome.answer else []), call.now],
                last=True,
            )
            if row is not None:
                return rows.turn(row)
        else:
            conversation_id = await db.value(update + " RETURNING conversation_id", params)
            if conversation_id is not None:
                await _end_turn(call, db, turn_id, conversation_id, outcome.answer, leftover)
                return await reads.turn(db, turn_id)
        conversation_id = await running_turn(db, turn_id, call.fence)  # raises: says why
        raise Busy(conversation_id, message=f"turn {turn_id} could not be finished")


async def _end_turn(
    call: Call, db: Sql, turn_id: int, conversation_id: str, answer: str | None, leftover: str
) -> None:
    """What ends with a finished turn, statement by statement: the code of its iterations still
    running indexed for search, those iterations ended as ``leftover``, the answer indexed, a
    stop asked of it answered, and its conversation touched."""
    await index_blocks(db, "SELECT id FROM iteration WHERE turn_id = ?", [turn_id])
    await db.run(
        "UPDATE iteration SET status = ? WHERE turn_id = ? AND status = 'running'",
        (leftover, turn_id),
    )
    if answer:
        await index_text(db, turn_id, "answer", answer)
    await cancels.clear(db, "?", [turn_id])  # a stop asked of it is answered by its end
    await db.run("UPDATE conversation SET updated_at = ? WHERE id = ?", (call.now, conversation_id))


def _chained_finish(db: Sql, update: str, answered: bool) -> str:
    """``_end_turn`` chained to the turn's guarded ``update`` in one statement (a backend that
    chains writes): each part writes only when the turn was finished. Its parameters after the
    update's: the leftover status, the answer (when ``answered``), the time."""
    code = db.dialect.index_insert(
        "SELECT t.id, 'code', b.code FROM t JOIN iteration i ON i.turn_id = t.id"
        " JOIN block b ON b.iteration_id = i.id WHERE i.status = 'running'"
        " ORDER BY b.iteration_id, b.position"
    )
    answer = db.dialect.index_insert("SELECT t.id, 'answer', CAST(? AS text) FROM t")
    return (
        f"WITH t AS ({update} RETURNING *), code AS ({code}),"
        " ended AS (UPDATE iteration SET status = ? FROM t"
        " WHERE iteration.turn_id = t.id AND iteration.status = 'running'),"
        + (f" answer AS ({answer})," if answered else "")
        + " stopped AS (DELETE FROM cancel_request USING t WHERE cancel_request.turn_id = t.id),"
        " touched AS (UPDATE conversation SET updated_at = ? FROM t"
        " WHERE conversation.id = t.conversation_id)"
        f" SELECT {TURN_COLUMNS} FROM t"
    )


async def delete_conversation(
    call: Call, conversation_id: str, *, lease_owner: str | None = None
) -> None:
    """Delete a conversation with all it wrote; blobs and value chunks nothing else uses are
    collected (the chunks in transactions of their own, ``values.collect_values``).

    Args:
        call: the call.
        conversation_id: the conversation.
        lease_owner: the caller's lease owner id; a live lease held by anyone else refuses.

    Raises:
        NotFound: unknown conversation.
        Busy: another owner holds a live lease (a turn is running there).
        CoveError: the conversation has forks (named in the message); delete them first.
    """
    async with call.writing() as db:
        record = await reads.conversation(db, conversation_id)
        holder, until = record.lease_owner, record.lease_until
        if holder is not None and holder != lease_owner and until is not None and until > call.now:
            raise Busy(
                conversation_id,
                holder,
                message=f"conversation {conversation_id} cannot be deleted: another cove process "
                f"is running a turn in it (lease held by {holder}); try again when it finishes",
            )
        forks = [
            str(row[0])
            for row in await db.rows(
                "SELECT id FROM conversation WHERE parent_id = ? ORDER BY created_at",
                (conversation_id,),
            )
        ]
        if forks:
            raise CoveError(
                f"conversation {conversation_id} cannot be deleted: it has forks "
                f"({', '.join(forks)}); delete them first"
            )
        candidates = await _blobs_of(db, conversation_id)
        await values.release_roots(db, "v.conversation_id = ?", [conversation_id])
        # Foreign keys cascade to turns, iterations, blocks, variable versions, sub-queries
        # and search rows (whose trigger removes the FTS entries).
        await db.run("DELETE FROM conversation WHERE id = ?", (conversation_id,))
        await collect_blobs(db, candidates)
    await values.collect_values(call)


async def _blobs_of(db: Sql, conversation_id: str) -> set[str]:
    """The blobs a conversation's rows name (to collect those nothing else names)."""
    owned: list[Any] = [conversation_id] * 4
    return {
        str(row[0])
        for row in await db.rows(
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


async def add_steering(call: Call, iteration_id: int, texts: list[str]) -> None:
    """Record the person's messages (steering) an iteration showed the model.

    Raises:
        NotFound: unknown iteration.
    """
    async with call.writing() as db:
        conversation_id = await db.value(
            "SELECT t.conversation_id FROM iteration i JOIN turn t ON t.id = i.turn_id"
            " WHERE i.id = ?",
            (iteration_id,),
        )
        if conversation_id is None:
            raise NotFound("iteration", str(iteration_id))
        await check_fence(db, call.fence, conversation_id)
        start = await db.value(
            "SELECT coalesce(max(position) + 1, 0) FROM steering WHERE iteration_id = ?",
            (iteration_id,),
        )
        await db.run_many(
            "INSERT INTO steering (iteration_id, position, text, created_at) VALUES (?, ?, ?, ?)",
            [(iteration_id, start + i, text, call.now) for i, text in enumerate(texts)],
        )
