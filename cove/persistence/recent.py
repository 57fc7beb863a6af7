"""Bounded reads for a turn's start: what they cost does not grow with the conversation."""

from __future__ import annotations

from cove.persistence import rows
from cove.persistence.chain import chain
from cove.persistence.database import Call
from cove.persistence.records import BlockRecord, TurnRecord


async def last_turn(call: Call, conversation_id: str) -> TurnRecord | None:
    """The latest turn the conversation sees, or None (one indexed lookup per fork level).

    Raises:
        NotFound: unknown conversation.
    """
    async with call.reading() as db:
        for cid, limit in await chain(db, conversation_id):
            row = await db.row(
                f"SELECT {rows.TURN_COLUMNS} FROM turn t WHERE t.conversation_id = ?"
                " AND t.position <= ? ORDER BY t.position DESC LIMIT 1",
                (cid, limit),
            )
            if row is not None:
                return rows.turn(row)
    return None


async def last_thinking(call: Call, turn_id: int) -> str | None:
    """The thinking of the turn's last iteration that recorded any, or None."""
    async with call.reading() as db:
        thinking = await db.value(
            "SELECT thinking FROM iteration WHERE turn_id = ? AND thinking IS NOT NULL"
            " AND thinking <> '' ORDER BY position DESC LIMIT 1",
            (turn_id,),
        )
    return None if thinking is None else str(thinking)


async def last_blocks(
    call: Call, conversation_id: str, limit: int
) -> list[tuple[int, int, BlockRecord]]:
    """The last ``limit`` blocks of the last ``limit`` turns, oldest first (fork-aware).

    Like ``recent_blocks``, but read turn by turn from the newest, so the cost follows ``limit``,
    not the conversation's length: blocks older than the ``limit`` latest turns are not looked for.

    Returns:
        ``(turn position, iteration position, block)`` tuples.

    Raises:
        NotFound: unknown conversation.
    """
    found: list[tuple[int, int, BlockRecord]] = []
    turns_left = limit
    async with call.reading() as db:
        for cid, lim in await chain(db, conversation_id):
            if len(found) >= limit or turns_left <= 0:
                break
            newest = await db.rows(
                "SELECT id, position FROM turn WHERE conversation_id = ? AND position <= ?"
                " ORDER BY position DESC LIMIT ?",
                (cid, lim, turns_left),
            )
            for turn_id, position in newest:
                turns_left -= 1
                for row in await db.rows(
                    f"SELECT i.position AS iteration_position, {rows.BLOCK_COLUMNS} FROM block b"
                    f" JOIN iteration i ON i.id = b.iteration_id {rows.BLOCK_BLOB_JOIN}"
                    " WHERE i.turn_id = ? ORDER BY i.position DESC, b.position DESC LIMIT ?",
                    (turn_id, limit - len(found)),
                ):
                    found.append((position, row["iteration_position"], rows.block(row)))
                if len(found) >= limit:
                    break
    found.reverse()
    return found
