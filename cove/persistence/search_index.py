"""Adding texts to the full-text index (``search_doc``, and SQLite's ``search_fts``).

Block code is indexed when its iteration closes, not as each block is recorded: every FTS5 commit
writes a new index segment, which would make each block's record several times dearer. Blocks
of an iteration that never closed normally are indexed when it is closed for it (end of turn,
crash recovery, lease take-over): those are exactly the blocks of iterations still ``running``.
How a text is indexed is the dialect's (FTS5 on SQLite, a ``tsvector`` on PostgreSQL).
"""

from __future__ import annotations

from cove.persistence.sql import Sql


async def index_text(db: Sql, turn_id: int, kind: str, text: str) -> None:
    """Add one searchable text."""
    await db.dialect.index_texts(db, [(turn_id, kind, text)])


async def index_blocks(db: Sql, running_iterations: str, params: list[object]) -> None:
    """Index the code of every block of the selected iterations, which must still be running.

    ``running_iterations`` is a subquery selecting iteration ids; call it before their status
    changes, inside the transaction that changes it.
    """
    await db.dialect.index_selected(
        db,
        "SELECT i.turn_id, 'code', b.code FROM block b JOIN iteration i ON i.id = b.iteration_id"
        f" WHERE i.status = 'running' AND i.id IN ({running_iterations})"
        " ORDER BY b.iteration_id, b.position",
        params,
    )
