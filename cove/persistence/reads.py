"""The read side of the store: each public function is one store method, on a read connection
(variables are ``variables.py``, search ``search.py``, a turn's start ``recent.py``).

Every function here is fork-aware where it takes a conversation id: a fork sees its parent's
turns (and everything written in them) up to ``fork_turn``, then its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from cove.errors import AmbiguousId, NotFound
from cove.persistence import rows
from cove.persistence.chain import VISIBLE_TURNS, chain_cte
from cove.persistence.database import Call
from cove.persistence.notes import read_notes
from cove.persistence.records import (
    BlockRecord,
    ConversationRecord,
    ConversationScan,
    SubqueryRecord,
    Transcript,
    TurnNote,
    TurnRecord,
)
from cove.persistence.sql import Sql


async def conversation(db: Sql, conversation_id: str) -> ConversationRecord:
    """One conversation; raise ``NotFound`` if unknown."""
    row = await db.row(rows.CONVERSATION_SELECT + " WHERE c.id = ?", (conversation_id,))
    if row is None:
        raise NotFound("conversation", conversation_id)
    return rows.conversation(row)


async def get_conversation(call: Call, conversation_id: str) -> ConversationRecord:
    """Return a conversation by exact id. Raises ``NotFound``."""
    async with call.reading() as db:
        return await conversation(db, conversation_id)


async def external(db: Sql, channel: str, external_id: str) -> ConversationRecord | None:
    """The conversation a channel knows by ``external_id``, if any."""
    row = await db.row(
        rows.CONVERSATION_SELECT + " WHERE c.channel = ? AND c.external_id = ?",
        (channel, external_id),
    )
    return None if row is None else rows.conversation(row)


async def find_external(call: Call, channel: str, external_id: str) -> ConversationRecord | None:
    """Return the conversation a channel knows by ``external_id``, or None."""
    async with call.reading() as db:
        return await external(db, channel, external_id)


async def resolve(call: Call, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord:
    """Return the conversation with this exact id or unique id prefix.

    With ``owner``, only that owner's conversations match (others are not found, and do not
    make a prefix ambiguous).

    Raises:
        AmbiguousId: the prefix matches several conversations (listed in the error).
        NotFound: nothing matches.
    """
    if not id_or_prefix:
        raise NotFound("conversation", id_or_prefix)
    mine, params = ("", []) if owner is None else (" AND owner = ?", [owner])
    async with call.reading() as db:
        exact = await db.row(
            "SELECT 1 FROM conversation WHERE id = ?" + mine, [id_or_prefix, *params]
        )
        if exact is not None:
            return await conversation(db, id_or_prefix)
        # A range over the primary key instead of LIKE: no wildcard characters to escape.
        matches = [
            str(row[0])
            for row in await db.rows(
                "SELECT id FROM conversation WHERE id >= ? AND id < ?" + mine + " ORDER BY id",
                [id_or_prefix, id_or_prefix + "\U0010ffff", *params],
            )
        ]
        if not matches:
            raise NotFound("conversation", id_or_prefix)
        if len(matches) > 1:
            raise AmbiguousId("conversation", id_or_prefix, matches)
        return await conversation(db, matches[0])


async def list_conversations(
    call: Call,
    *,
    channel: str | None = None,
    limit: int = 50,
    before: float | None = None,
    owner: str | None = None,
) -> list[ConversationRecord]:
    """Conversations newest first by ``updated_at``, with ``turn_count`` filled.

    Args:
        call: the call.
        channel: only this channel's conversations.
        limit: at most this many.
        before: only conversations updated before this time (the next page).
        owner: only this owner's conversations.
    """
    where: list[str] = []
    params: list[Any] = []
    if owner is not None:
        where.append("c.owner = ?")
        params.append(owner)
    if channel is not None:
        where.append("c.channel = ?")
        params.append(channel)
    if before is not None:
        where.append("c.updated_at < ?")
        params.append(before)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    query = rows.CONVERSATION_SELECT + clause + " ORDER BY c.updated_at DESC, c.id LIMIT ?"
    async with call.reading() as db:
        return [rows.conversation(row) for row in await db.rows(query, [*params, limit])]


async def turn(db: Sql, turn_id: int) -> TurnRecord:
    """One turn without its iterations; raise ``NotFound`` if unknown."""
    found = await db.row(f"SELECT {rows.TURN_COLUMNS} FROM turn t WHERE t.id = ?", (turn_id,))
    if found is None:
        raise NotFound("turn", str(turn_id))
    return rows.turn(found)


async def get_turn(call: Call, turn_id: int) -> TurnRecord:
    """Return one turn (without iterations). Raises ``NotFound``."""
    async with call.reading() as db:
        return await turn(db, turn_id)


async def turns(call: Call, conversation_id: str) -> list[TurnRecord]:
    """The turns a conversation sees in order (for a fork, the parent's come first)."""
    async with call.reading() as db:
        cte, params = await chain_cte(db, conversation_id)
        query = f"{cte} SELECT {rows.TURN_COLUMNS} FROM turn t {VISIBLE_TURNS} ORDER BY t.position"
        return [rows.turn(row) for row in await db.rows(query, params)]


async def transcript(call: Call, conversation_id: str, *, turn: int | None = None) -> Transcript:
    """The whole conversation, or the turn at position ``turn``, with all it wrote: turns ->
    iterations -> blocks and sub-queries, plus the variable versions written.

    Raises:
        NotFound: unknown conversation.
    """
    async with call.reading() as db:
        return await _transcript(db, conversation_id, turn)


async def _transcript(db: Sql, conversation_id: str, turn: int | None) -> Transcript:
    found = await conversation(db, conversation_id)
    cte, params = await chain_cte(db, conversation_id)
    only = ""
    if turn is not None:
        only = " AND t.position = ?"
        params = [*params, turn]
    visible = f"JOIN turn t ON t.id = i.turn_id {VISIBLE_TURNS}{only}"

    blocks: defaultdict[int, list[BlockRecord]] = defaultdict(list)
    for row in await db.rows(
        f"{cte} SELECT {rows.BLOCK_COLUMNS} FROM block b JOIN iteration i ON i.id = b.iteration_id"
        f" {visible} {rows.BLOCK_BLOB_JOIN} ORDER BY b.iteration_id, b.position",
        params,
    ):
        blocks[row["iteration_id"]].append(rows.block(row))
    subqueries: defaultdict[int, list[SubqueryRecord]] = defaultdict(list)
    for row in await db.rows(
        f"{cte} SELECT s.* FROM subquery s JOIN iteration i ON i.id = s.iteration_id {visible}"
        " ORDER BY s.iteration_id, s.position",
        params,
    ):
        subqueries[row["iteration_id"]].append(rows.subquery(row))
    steering: defaultdict[int, list[str]] = defaultdict(list)
    for row in await db.rows(
        f"{cte} SELECT s.iteration_id, s.text FROM steering s"
        f" JOIN iteration i ON i.id = s.iteration_id {visible}"
        " ORDER BY s.iteration_id, s.position",
        params,
    ):
        steering[row[0]].append(row[1])
    iterations = defaultdict(list)
    for row in await db.rows(
        f"{cte} SELECT i.* FROM iteration i {visible} ORDER BY i.turn_id, i.position", params
    ):
        iterations[row["turn_id"]].append(
            rows.iteration(
                row,
                tuple(blocks[row["id"]]),
                tuple(subqueries[row["id"]]),
                tuple(steering[row["id"]]),
            )
        )
    turn_records = tuple(
        rows.turn(row, tuple(iterations[row["id"]]))
        for row in await db.rows(
            f"{cte} SELECT {rows.TURN_COLUMNS} FROM turn t {VISIBLE_TURNS}{only}"
            " ORDER BY t.position",
            params,
        )
    )
    var_versions = tuple(
        [
            await rows.var_version(db, row)
            for row in await db.rows(
                f"{cte} SELECT {rows.VAR_COLUMNS} {rows.VAR_FROM} {VISIBLE_TURNS}{only}"
                f" ORDER BY {rows.VAR_ORDER}",
                params,
            )
        ]
    )
    notes = await _notes(db, cte, params, only)
    return Transcript(found, turn_records, var_versions, notes)


async def _notes(db: Sql, cte: str, params: list[Any], only: str) -> tuple[TurnNote, ...]:
    query = (
        f"{cte} SELECT n.*, t.position FROM turn_note n JOIN turn t ON t.id = n.turn_id"
        f" {VISIBLE_TURNS}{only} ORDER BY t.position, n.seq"
    )
    return await read_notes(db, query, params)


async def recent_blocks(
    call: Call, conversation_id: str, limit: int
) -> list[tuple[int, int, BlockRecord]]:
    """The last ``limit`` blocks across turns, oldest first (fork-aware).

    Returns:
        ``(turn position, iteration position, block)`` tuples.
    """
    async with call.reading() as db:
        cte, params = await chain_cte(db, conversation_id)
        query = (
            f"{cte} SELECT t.position AS turn_position, i.position AS iteration_position,"
            f" {rows.BLOCK_COLUMNS} FROM block b JOIN iteration i ON i.id = b.iteration_id"
            f" JOIN turn t ON t.id = i.turn_id {VISIBLE_TURNS} {rows.BLOCK_BLOB_JOIN}"
            " ORDER BY t.position DESC, i.position DESC, b.position DESC LIMIT ?"
        )
        found = [
            (row["turn_position"], row["iteration_position"], rows.block(row))
            for row in await db.rows(query, [*params, limit])
        ]
    found.reverse()
    return found


async def figure(call: Call, conversation_id: str, digest: str) -> bytes:
    """The PNG of a figure (by its digest) of a block the conversation sees (its fork chain
    included).

    Raises:
        NotFound: The conversation is unknown, or none of its blocks made that figure.
    """
    async with call.reading() as db:
        await conversation(db, conversation_id)
        cte, params = await chain_cte(db, conversation_id)
        data = await db.value(
            f"{cte} SELECT bl.data FROM block_figure f JOIN blob bl ON bl.hash = f.digest"
            " JOIN block b ON b.id = f.block_id JOIN iteration i ON i.id = b.iteration_id"
            f" JOIN turn t ON t.id = i.turn_id {VISIBLE_TURNS} WHERE f.digest = ? LIMIT 1",
            [*params, digest],
        )
    if data is None:
        raise NotFound("figure", digest)
    return bytes(data)


async def system_prompt(call: Call, digest: str) -> str:
    """The system prompt stored under ``digest``. Raises ``NotFound``."""
    async with call.reading() as db:
        data = await db.value("SELECT data FROM blob WHERE hash = ?", (digest,))
    if data is None:
        raise NotFound("system prompt", digest)
    return bytes(data).decode()


async def subqueries(call: Call, turn_id: int) -> list[SubqueryRecord]:
    """A turn's sub-queries in iteration and call order. Raises ``NotFound``."""
    query = (
        "SELECT s.* FROM subquery s JOIN iteration i ON i.id = s.iteration_id"
        " WHERE i.turn_id = ? ORDER BY i.position, s.position"
    )
    async with call.reading() as db:
        await turn(db, turn_id)
        return [rows.subquery(row) for row in await db.rows(query, (turn_id,))]


async def transcript_since(call: Call, conversation_id: str, position: int) -> Transcript:
    """The turns at ``position`` and after, with all they wrote (what a watcher missed).

    Raises:
        NotFound: unknown conversation.
    """
    async with call.reading() as db:
        found_conversation = await conversation(db, conversation_id)
        cte, params = await chain_cte(db, conversation_id)
        positions = [
            row[0]
            for row in await db.rows(
                f"{cte} SELECT t.position FROM turn t {VISIBLE_TURNS} WHERE t.position >= ?"
                " ORDER BY t.position",
                [*params, position],
            )
        ]
        found = [await _transcript(db, conversation_id, p) for p in positions]
    return Transcript(
        found_conversation,
        tuple(turn for part in found for turn in part.turns),
        tuple(version for part in found for version in part.var_versions),
        tuple(note for part in found for note in part.notes),
    )


async def conversation_scan(call: Call, since: float) -> ConversationScan:
    """Conversations updated at or after ``since``, the running ones, and the count.

    Three indexed queries, so a channel can keep its list current after every commit.
    """
    async with call.reading() as db:
        changed = tuple(
            rows.conversation(row)
            for row in await db.rows(
                rows.CONVERSATION_SELECT + " WHERE c.updated_at >= ? ORDER BY c.updated_at, c.id",
                (since,),
            )
        )
        running = frozenset(
            str(row[0])
            for row in await db.rows("SELECT conversation_id FROM turn WHERE status = 'running'")
        )
        count = int(await db.value("SELECT count(*) FROM conversation"))
    return ConversationScan(changed, running, count)


async def conversation_ids(call: Call) -> set[str]:
    """Every conversation id (to notice deletions)."""
    async with call.reading() as db:
        return {str(row[0]) for row in await db.rows("SELECT id FROM conversation")}


#: Conversations per ``change_markers`` statement (an ``IN`` list of this many ids).
_MARKERS_BATCH = 500


async def change_markers(call: Call, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """For each of the conversations, a value that differs after any change a watcher of it
    would see; an unknown id is left out.

    The latest own turn's status, its iterations' progress (how many, how many answered, how
    many ended: each only grows), its block, steering and note counts, the title and the
    lease: indexed reads, one statement for up to 500 conversations, so the followers of a
    process learn which of their conversations changed after a commit with one read, and read
    a transcript only for those.
    """
    found: dict[str, tuple[Any, ...]] = {}
    async with call.reading() as db:
        for start in range(0, len(conversation_ids), _MARKERS_BATCH):
            batch = list(conversation_ids[start : start + _MARKERS_BATCH])
            marks = ",".join("?" * len(batch))
            rows = await db.rows(
                f"""
        SELECT c.id, c.title, c.lease_owner, t.id, t.status,
               (SELECT count(*) FROM iteration i WHERE i.turn_id = t.id),
               (SELECT count(*) FROM iteration i
                 WHERE i.turn_id = t.id AND i.raw_reply IS NOT NULL),
               (SELECT count(*) FROM iteration i
                 WHERE i.turn_id = t.id AND i.status <> 'running'),
               (SELECT count(*) FROM block b JOIN iteration i ON i.id = b.iteration_id
                 WHERE i.turn_id = t.id),
               (SELECT count(*) FROM steering s JOIN iteration i ON i.id = s.iteration_id
                 WHERE i.turn_id = t.id),
               (SELECT count(*) FROM turn_note n WHERE n.turn_id = t.id),
               (SELECT count(*) FROM var_version v WHERE v.conversation_id = c.id)
        FROM conversation c
        LEFT JOIN turn t ON t.id = (
            SELECT l.id FROM turn l WHERE l.conversation_id = c.id
            ORDER BY l.position DESC LIMIT 1)
        WHERE c.id IN ({marks})
        """,
                batch,
            )
            for row in rows:
                values = tuple(row)
                found[str(values[0])] = values[1:]
    return found
