"""Mapping database rows to record shapes (and the SELECT lists that feed them)."""

from __future__ import annotations

import json
from typing import Any, cast

from cove.codec.chunks import text_hash
from cove.persistence import values
from cove.persistence.records import (
    LABEL_CHARS,
    BlockRecord,
    ConversationRecord,
    IterationRecord,
    IterationStatus,
    SubqueryRecord,
    TurnRecord,
    VarVersionRecord,
)
from cove.persistence.sql import Row, Sql
from cove.results import BlockFigure, FigureAxes, TurnStatus, Usage, VarKind

#: A conversation with what lists show of it. Each subquery reads one entry of the turn
#: table's (conversation_id, position) index, so a list costs the same whatever its turns hold.
CONVERSATION_SELECT = f"""
SELECT c.*,
       coalesce(c.fork_turn, 0)
       + (SELECT count(*) FROM turn t WHERE t.conversation_id = c.id) AS turn_count,
       (SELECT substr(t.request, 1, {LABEL_CHARS * 4}) FROM turn t WHERE t.conversation_id = c.id
         ORDER BY t.position LIMIT 1) AS first_request,
       (SELECT t.status FROM turn t WHERE t.conversation_id = c.id
         ORDER BY t.position DESC LIMIT 1) AS last_status
FROM conversation c
"""

TURN_COLUMNS = (
    "t.id, t.conversation_id, t.position, t.request, t.status, t.answer, t.confidence, t.model,"
    " t.tokens_in, t.tokens_out, t.cost_usd, t.started_at, t.finished_at, t.error,"
    " t.attachments, t.model_options, t.cost_known"
)

BLOCK_COLUMNS = "b.*, bb.data AS blob_data"
BLOCK_BLOB_JOIN = "LEFT JOIN blob bb ON bb.hash = b.result_blob"

# Variable versions joined to where they were written; add the chain join and filters.
VAR_FROM = """
FROM var_version v
JOIN block b ON b.id = v.block_id
JOIN iteration i ON i.id = b.iteration_id
JOIN turn t ON t.id = i.turn_id
"""
VAR_COLUMNS = (
    "v.conversation_id, v.name, v.version, v.kind, v.encoded, v.encoded_blob, v.root_chunk,"
    " v.digest, v.thinned, v.type_name, v.preview, v.size, t.position AS turn_position,"
    " i.position AS iteration_position, b.position AS block_position, v.created_at"
)
# Ordering by where a version was written, not by its number, keeps forks and restores honest;
# versions one block wrote come in the order it wrote them (their ids), on either backend.
VAR_ORDER = "t.position, i.position, b.position, v.version, v.id"


def _text(inline: str | None, data: bytes | None) -> str | None:
    """An encoded value stored inline or in a blob, as text either way."""
    if data is not None:
        return bytes(data).decode()
    return inline


def conversation(row: Row) -> ConversationRecord:
    """Build a ``ConversationRecord`` from a ``CONVERSATION_SELECT`` row."""
    return ConversationRecord(
        id=row["id"],
        channel=row["channel"],
        external_id=row["external_id"],
        title=row["title"],
        parent_id=row["parent_id"],
        fork_turn=row["fork_turn"],
        workspace=row["workspace"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        lease_owner=row["lease_owner"],
        lease_until=row["lease_until"],
        turn_count=row["turn_count"],
        owner=row["owner"],
        first_request=row["first_request"],
        last_status=row["last_status"],
    )


def usage(row: Row) -> Usage:
    """The ``tokens_in``, ``tokens_out`` and ``cost_usd`` columns of a turn, iteration or
    sub-query row."""
    return Usage(row["tokens_in"], row["tokens_out"], row["cost_usd"])


def turn(row: Row, iterations: tuple[IterationRecord, ...] = ()) -> TurnRecord:
    """Build a ``TurnRecord`` from a ``TURN_COLUMNS`` row."""
    return TurnRecord(
        id=row["id"],
        conversation_id=row["conversation_id"],
        position=row["position"],
        request=row["request"],
        status=cast(TurnStatus, row["status"]),
        answer=row["answer"],
        confidence=row["confidence"],
        model=row["model"],
        usage=usage(row),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=row["error"],
        iterations=iterations,
        attachments=tuple((str(n), int(z)) for n, z in json.loads(row["attachments"] or "[]")),
        model_options=json.loads(row["model_options"] or "{}"),
        cost_known=bool(row["cost_known"]),
    )


def iteration(
    row: Row,
    blocks: tuple[BlockRecord, ...] = (),
    subqueries: tuple[SubqueryRecord, ...] = (),
    steering: tuple[str, ...] = (),
) -> IterationRecord:
    """Build an ``IterationRecord`` from an ``iteration`` row."""
    return IterationRecord(
        raw_reply=row["raw_reply"],
        thinking=row["thinking"],
        usage=usage(row),
        llm_ms=row["llm_ms"],
        planned_blocks=tuple(json.loads(row["planned_blocks"] or "[]")),
        model=row["model"],
        id=row["id"],
        turn_id=row["turn_id"],
        position=row["position"],
        status=cast(IterationStatus, row["status"]),
        system_prompt_hash=row["system_prompt_hash"],
        context_message=row["context_message"],
        request_message=row["request_message"],
        parse_error=row["parse_error"],
        duration_ms=row["duration_ms"],
        seed=row["seed"],
        started_at=row["started_at"],
        blocks=blocks,
        subqueries=subqueries,
        steering=steering,
        refusal=row["refusal"],
    )


def block(row: Row) -> BlockRecord:
    """Build a ``BlockRecord`` from a ``BLOCK_COLUMNS`` row (large results read back as text)."""
    return BlockRecord(
        id=row["id"],
        iteration_id=row["iteration_id"],
        position=row["position"],
        code=row["code"],
        ok=bool(row["ok"]),
        result_preview=row["result_preview"],
        result_encoded=_text(row["result_encoded"], row["blob_data"]),
        stdout=row["stdout"],
        stderr=row["stderr"],
        error=row["error"],
        duration_ms=row["duration_ms"],
        timed_out=bool(row["timed_out"]),
        seed=row["seed"],
        clock=row["clock"],
        figures=figures_of(row["figures"]),
    )


def figures_json(figures: tuple[BlockFigure, ...]) -> str:
    """The block row's ``figures`` column: what readers show of each figure (no PNG)."""
    return json.dumps(
        [
            {
                "position": f.position,
                "digest": f.digest,
                "width": f.width,
                "height": f.height,
                "title": f.title,
                "axes": [[a.title, a.xlabel, a.ylabel] for a in f.axes],
            }
            for f in figures
        ],
        ensure_ascii=False,
    )


def figures_of(text: str | None) -> tuple[BlockFigure, ...]:
    """A block's figures from its ``figures`` column."""
    return tuple(
        BlockFigure(
            position=int(item["position"]),
            digest=str(item["digest"]),
            width=int(item["width"]),
            height=int(item["height"]),
            title=str(item["title"]),
            axes=tuple(FigureAxes(*map(str, axes)) for axes in item["axes"]),
        )
        for item in json.loads(text or "[]")
    )


def subquery(row: Row) -> SubqueryRecord:
    """Build a ``SubqueryRecord`` from a ``subquery`` row."""
    return SubqueryRecord(
        id=row["id"],
        iteration_id=row["iteration_id"],
        position=row["position"],
        block_position=row["block_position"],
        prompt=row["prompt"],
        reply=row["reply"],
        model=row["model"],
        usage=usage(row),
        duration_ms=row["duration_ms"],
        error=row["error"],
    )


async def var_version(db: Sql, row: Row) -> VarVersionRecord:
    """Build a ``VarVersionRecord`` from a ``VAR_COLUMNS`` row, reading its root (from a chunk,
    or from a blob for a row written before chunks) if needed."""
    encoded: str | None = row["encoded"]
    if row["encoded_blob"] is not None:
        data: Any = await db.value("SELECT data FROM blob WHERE hash = ?", (row["encoded_blob"],))
        encoded = _text(None, data)
    elif row["root_chunk"] is not None:
        encoded = await values.root_text(db, row["root_chunk"])
    digest = row["digest"]
    if digest is None and encoded is not None:
        digest = text_hash(encoded)
    return VarVersionRecord(
        conversation_id=row["conversation_id"],
        name=row["name"],
        version=row["version"],
        kind=cast(VarKind, row["kind"]),
        encoded=encoded,
        type_name=row["type_name"],
        preview=row["preview"],
        size=row["size"],
        turn_position=row["turn_position"],
        iteration_position=row["iteration_position"],
        block_position=row["block_position"],
        created_at=row["created_at"],
        digest=digest,
        thinned=bool(row["thinned"]),
    )
