"""Builders and probes shared by the store tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from cove.persistence.database import Transactions
from cove.persistence.records import (
    IterationStatus,
    IterationWrite,
    ReplyWrite,
)
from cove.persistence.store import Store
from cove.results import BlockResult, TurnOutcome, Usage, VarVersion

SYSTEM_PROMPT = "You answer by writing Python code."


class FakeClock:
    """A clock that moves a millisecond per reading, and jumps when told to."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 0.001
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection for looking at what the store wrote."""
    with closing(sqlite3.connect(path)) as conn:
        yield conn


def count(path: Path, table: str) -> int:
    """Rows in ``table``."""
    with raw(path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def rows_in(store: Store, table: str) -> int:
    """Rows in ``table``, read through the store's own backend (SQLite or PostgreSQL)."""

    async def counted(db: Transactions) -> int:
        async with db.reading() as sql:
            return int(await sql.value(f"SELECT count(*) FROM {table}"))

    return await store._db.run(counted)  # type: ignore[attr-defined,no-any-return]


def iteration_write(
    *,
    blocks: int = 3,
    variables: dict[str, tuple[int, str | None]] | None = None,
    status: IterationStatus = "ok",
    code: str = "x = {n}",
    result: str | None = "1",
    thinking: str = "think",
) -> IterationWrite:
    """An iteration with ``blocks`` blocks; ``variables`` maps name -> (version, encoded).

    Variable versions are written by the last block; ``encoded=None`` records a deletion.
    """
    block_writes = tuple(
        BlockResult(
            position=k,
            code=code.format(n=k),
            ok=True,
            result_preview=result,
            result_encoded=result,
            stdout=f"out {k}\n",
            duration_ms=1.5,
            seed=k,
            clock=1_700_000_000.0 + k,
        )
        for k in range(blocks)
    )
    versions = tuple(
        VarVersion(
            name=name,
            version=version,
            block_position=blocks - 1,
            kind="deleted" if encoded is None else "value",
            encoded=encoded,
            type_name="int",
            preview=encoded or "",
            size=None,
        )
        for name, (version, encoded) in (variables or {}).items()
    )
    return IterationWrite(
        status=status,
        reply=ReplyWrite(
            raw_reply='{"code": ["x = 1"]}', thinking=thinking, usage=Usage(10, 5), llm_ms=12.0
        ),
        duration_ms=20.0,
        blocks=block_writes,
        var_versions=versions,
    )


async def add_iteration(
    store: Store, turn_id: int, position: int, result: IterationWrite | None = None
) -> int:
    """Start and finish one iteration; return its id."""
    iteration_id = await store.start_iteration(
        turn_id,
        position,
        system_prompt=SYSTEM_PROMPT,
        request_message="request",
        context_message=f"[iteration {position}]",
        seed=position,
    )
    await store.finish_iteration(iteration_id, result or iteration_write())
    return iteration_id


async def add_turn(
    store: Store,
    conversation_id: str,
    request: str = "question",
    variables: dict[str, tuple[int, str | None]] | None = None,
    answer: str = "answer",
) -> int:
    """A finished turn with one iteration writing ``variables``; return the turn id."""
    turn = await store.start_turn(conversation_id, request)
    await add_iteration(store, turn.id, 0, iteration_write(variables=variables))
    await store.finish_turn(
        turn.id, TurnOutcome("done", answer=answer, confidence="high", usage=Usage(10, 5, 0.01))
    )
    return turn.id


def file_bytes(path: Path) -> bytes:
    """The file's content, to prove a refused file was not modified."""
    return path.read_bytes()


def write_file(path: Path, content: bytes) -> None:
    """Put ``content`` at ``path`` (a foreign file for the store to refuse)."""
    path.write_bytes(content)


def file_names(folder: Path) -> list[str]:
    """The names in ``folder``, sorted: shows no -wal/-shm files were created."""
    return sorted(p.name for p in folder.iterdir())
