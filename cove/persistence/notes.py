"""Turn notes: the nudges, sandbox restarts and endpoint retries a turn's timeline showed.

None has a row of its own in the history (a nudge becomes part of a context message, a restart
happens between two blocks, a retry before a reply), so each is kept with the seq it was
published under.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cove.errors import NotFound
from cove.persistence.database import Call
from cove.persistence.records import NoteKind, TurnNote
from cove.persistence.sql import Sql


async def add_note(
    call: Call,
    turn_id: int,
    seq: int,
    kind: NoteKind,
    text: str,
    restored: Sequence[str] = (),
    lost: Sequence[str] = (),
    nudge_kind: str | None = None,
    retry: tuple[int, int] | None = None,
) -> None:
    """Keep a nudge, sandbox restart or endpoint retry turn ``turn_id`` showed, under its
    published seq (``nudge_kind`` for nudges, ``retry`` = (attempt, of) for retries); a note
    already kept under ``seq`` stays as it is.

    Raises:
        NotFound: unknown turn.
    """
    attempt, budget = retry if retry is not None else (None, None)
    async with call.writing() as db:
        if await db.row("SELECT 1 FROM turn WHERE id = ?", (turn_id,)) is None:
            raise NotFound("turn", str(turn_id))
        await db.run(
            "INSERT INTO turn_note (turn_id, seq, kind, text, restored, lost,"
            " nudge_kind, retry_attempt, retry_budget, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                turn_id,
                seq,
                kind,
                text,
                json.dumps(list(restored)),
                json.dumps(list(lost)),
                nudge_kind,
                attempt,
                budget,
                call.now,
            ),
        )


async def read_notes(db: Sql, query: str, params: Sequence[Any]) -> tuple[TurnNote, ...]:
    """The notes ``query`` selects (``n.*`` of turn_note and ``t.position`` of its turn)."""
    return tuple(
        TurnNote(
            turn_id=row["turn_id"],
            turn_position=row["position"],
            seq=row["seq"],
            kind=row["kind"],
            text=row["text"],
            restored=tuple(json.loads(row["restored"])),
            lost=tuple(json.loads(row["lost"])),
            nudge_kind=row["nudge_kind"],
            retry=_retry(row["retry_attempt"], row["retry_budget"]),
        )
        for row in await db.rows(query, params)
    )


def _retry(attempt: int | None, budget: int | None) -> tuple[int, int] | None:
    return None if attempt is None or budget is None else (attempt, budget)
