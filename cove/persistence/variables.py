"""Reading variable versions: a variable's history, the state as of a turn, one version.

Fork-aware: a fork sees its parent's versions up to its fork point, then its own.
"""

from __future__ import annotations

from cove.errors import NotFound
from cove.persistence import rows
from cove.persistence.chain import VISIBLE_TURNS, chain_cte
from cove.persistence.database import Call
from cove.persistence.records import VarVersionRecord


async def var_history(call: Call, conversation_id: str, name: str) -> list[VarVersionRecord]:
    """Every version of a variable the conversation sees, oldest first.

    Raises:
        NotFound: the conversation is unknown or the name never existed in it.
    """
    async with call.reading() as db:
        cte, params = await chain_cte(db, conversation_id)
        query = (
            f"{cte} SELECT {rows.VAR_COLUMNS} {rows.VAR_FROM} {VISIBLE_TURNS}"
            f" WHERE v.name = ? ORDER BY {rows.VAR_ORDER}"
        )
        found = [await rows.var_version(db, row) for row in await db.rows(query, [*params, name])]
    if not found:
        raise NotFound("variable", name)
    return found


async def vars_as_of(
    call: Call, conversation_id: str, turn: int | None = None, *, include_deleted: bool = False
) -> dict[str, VarVersionRecord]:
    """The latest version of each variable at or before turn position ``turn``.

    Args:
        call: the call.
        conversation_id: the conversation (a fork sees its parent up to the fork point).
        turn: the last turn position to consider; None means now.
        include_deleted: keep names whose latest version is a deletion.

    Returns:
        Name -> version, in the order the versions were written.
    """
    deleted = "" if include_deleted else " WHERE kind != 'deleted'"
    async with call.reading() as db:
        cte, params = await chain_cte(db, conversation_id, upto=turn)
        query = f"""
            {cte}, ranked AS (
                SELECT {rows.VAR_COLUMNS}, t.position AS tp, i.position AS ip,
                       b.position AS bp, v.id AS vid,
                       row_number() OVER (
                           PARTITION BY v.name
                           ORDER BY t.position DESC, i.position DESC, b.position DESC,
                                    v.version DESC
                       ) AS recency
                {rows.VAR_FROM} {VISIBLE_TURNS}
            )
            SELECT * FROM (SELECT * FROM ranked WHERE recency = 1) latest{deleted}
            ORDER BY tp, ip, bp, version, vid
        """
        return {
            row["name"]: await rows.var_version(db, row) for row in await db.rows(query, params)
        }


async def var_version(
    call: Call, conversation_id: str, name: str, version: int
) -> VarVersionRecord:
    """One version of a variable the conversation sees (the nearest conversation in the fork
    chain wins). Raises ``NotFound``."""
    async with call.reading() as db:
        cte, params = await chain_cte(db, conversation_id)
        query = (
            f"{cte} SELECT {rows.VAR_COLUMNS} {rows.VAR_FROM} {VISIBLE_TURNS}"
            " WHERE v.name = ? AND v.version = ? ORDER BY chain.depth LIMIT 1"
        )
        row = await db.row(query, [*params, name, version])
        if row is None:
            raise NotFound("variable version", f"{name} v{version}")
        return await rows.var_version(db, row)
