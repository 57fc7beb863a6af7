"""Adding texts to the full-text index (``search_doc`` + ``search_fts``).

Block code is indexed when its iteration closes, not as each block is recorded: every FTS5 commit
writes a new index segment, which would make each block's record several times dearer. Blocks
of an iteration that never closed normally are indexed when it is closed for it (end of turn,
crash recovery, lease take-over): those are exactly the blocks of iterations still ``running``.
"""

from __future__ import annotations

import sqlite3


def index_text(conn: sqlite3.Connection, turn_id: int, kind: str, text: str) -> None:
    """Add one searchable text; the search_doc id doubles as the FTS rowid."""
    cursor = conn.execute("INSERT INTO search_doc (turn_id, kind) VALUES (?, ?)", (turn_id, kind))
    conn.execute("INSERT INTO search_fts (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))


def index_blocks(conn: sqlite3.Connection, running_iterations: str, params: list[object]) -> None:
    """Index the code of every block of the selected iterations, which must still be running.

    ``running_iterations`` is a subquery selecting iteration ids; call it before their status
    changes, inside the transaction that changes it.
    """
    rows = conn.execute(
        "SELECT i.turn_id, b.code FROM block b JOIN iteration i ON i.id = b.iteration_id"
        f" WHERE i.status = 'running' AND i.id IN ({running_iterations})"
        " ORDER BY b.iteration_id, b.position",
        params,
    ).fetchall()
    for turn_id, code in rows:
        index_text(conn, turn_id, "code", code)
