"""Crash safety: a writer killed with SIGKILL at random moments never leaves a partial unit.

A child process writes iterations (3 blocks + 2 variable versions each) in a loop and prints
each id once ``finish_iteration`` has returned. After every kill the database must pass
``integrity_check``, every reported iteration must be complete, and no iteration may be
half-written; reopening turns the running leftovers into ``interrupted`` ones.

A second writer records iterations the way the engine does, one unit at a time (the reply on
arrival, each block with its versions as it finishes), and is killed in the middle of them: every
unit it reported is there, no unit is partial, and an interrupted iteration shows its reply, its
finished blocks and which block was running.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cove.persistence.store import Store
from tests.persistence.store_helpers import raw

pytestmark = pytest.mark.slow  # sandbox workers started per test

WORKER = Path(__file__).with_name("store_worker.py")
KILLS = 24


def _run_and_kill(
    db: Path, rng: random.Random, early: bool, command: str = "crash-writer"
) -> set[int]:
    """Start a writer, SIGKILL it at a random moment, return the ids it reported."""
    return {int(line) for line in _kill_writer(db, rng, early, command) if line.isdigit()}


def _kill_writer(db: Path, rng: random.Random, early: bool, command: str) -> list[str]:
    """Start a writer, SIGKILL it at a random moment, return the lines it printed."""
    child = subprocess.Popen(
        [sys.executable, str(WORKER), command, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if early:
        # Anywhere from interpreter start-up through migration and the first writes.
        time.sleep(rng.uniform(0.0, 0.4))
    else:
        first = child.stdout.readline()
        assert first.startswith("conversation"), child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0.0, 0.08))
    child.send_signal(signal.SIGKILL)
    out, err = child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL, err
    lines = out.split("\n")
    return lines[:-1]  # the last piece is empty, or a line the kill cut short: not a report


def _check_raw(db: Path, reported: set[int]) -> None:
    """What the killed writer left, before any cove code touches the file again."""
    with raw(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'iteration'").fetchone():
            assert not reported  # killed before the first migration committed
            return
        rows = conn.execute(
            """
            SELECT i.id, i.status,
                   (SELECT count(*) FROM block b WHERE b.iteration_id = i.id),
                   (SELECT count(*) FROM var_version v JOIN block b ON b.id = v.block_id
                    WHERE b.iteration_id = i.id)
            FROM iteration i
            """
        ).fetchall()
        fts = conn.execute(
            "SELECT (SELECT count(*) FROM search_doc), (SELECT count(*) FROM search_fts)"
        ).fetchone()
    state = {row[0]: row[1:] for row in rows}
    assert reported <= state.keys()
    for iteration_id, (status, blocks, versions) in state.items():
        if status == "ok":
            assert (blocks, versions) == (3, 2), iteration_id
        else:
            assert status in ("running", "interrupted"), iteration_id
            assert (blocks, versions) == (0, 0), iteration_id
            assert iteration_id not in reported
    assert fts[0] == fts[1]


async def _check_reopened(db: Path, reported: set[int]) -> None:
    async with Store.open(db):
        pass
    with raw(db) as conn:
        running = conn.execute(
            "SELECT (SELECT count(*) FROM turn WHERE status = 'running'),"
            " (SELECT count(*) FROM iteration WHERE status = 'running')"
        ).fetchone()
        committed = {row[0] for row in conn.execute("SELECT id FROM iteration WHERE status = 'ok'")}
    assert running == (0, 0)
    assert reported <= committed


def test_killed_writers_never_leave_partial_iterations(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(20240611)
    reported: set[int] = set()
    for kill in range(KILLS):
        reported |= _run_and_kill(db, rng, early=kill % 4 == 0)
        _check_raw(db, reported)
        asyncio.run(_check_reopened(db, reported))
    # The kills must have landed after real work, not only during start-up.
    assert len(reported) >= KILLS


def _check_units(db: Path, lines: list[str]) -> set[tuple[int, str]]:
    """What a killed unit-writer left: every reported unit present, none partial."""
    # A line cut short by the kill is not a report.
    words = [line.split() for line in lines if line[:1].isdigit()]
    reported = {(int(w[0]), " ".join(w[1:])) for w in words if len(w) > 1}
    with raw(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        rows = conn.execute(
            "SELECT id, status, raw_reply, planned_blocks FROM iteration"
        ).fetchall()
        blocks = {
            (row[0], row[1]): row[2]
            for row in conn.execute(
                "SELECT b.iteration_id, b.position,"
                " (SELECT count(*) FROM var_version v WHERE v.block_id = b.id) FROM block b"
            )
        }
        fts = conn.execute(
            "SELECT (SELECT count(*) FROM search_doc), (SELECT count(*) FROM search_fts)"
        ).fetchone()
    assert fts[0] == fts[1]
    present: set[tuple[int, str]] = set()
    for iteration_id, status, raw_reply, planned in rows:
        own = sorted(position for (owner, position) in blocks if owner == iteration_id)
        assert own == list(range(len(own))), iteration_id  # blocks land in order, none skipped
        for position in own:
            # A block and its versions are one unit: block 2 carries both versions.
            assert blocks[(iteration_id, position)] == (2 if position == 2 else 0)
            present.add((iteration_id, f"block {position}"))
        if own:
            assert raw_reply is not None and len(json.loads(planned)) == 3
        if raw_reply is not None:
            present.add((iteration_id, "reply"))
        if status == "ok":
            assert len(own) == 3
            present.add((iteration_id, "done"))
        else:
            assert status in ("running", "interrupted"), iteration_id
    assert reported <= present, reported - present
    return reported


async def _check_interrupted_iterations(db: Path) -> int:
    """After reopening: every cut-short iteration says which block was running; return them."""
    cut_short = 0
    async with Store.open(db) as store:
        [conversation, *_] = await store.list_conversations()
        transcript = await store.transcript(conversation.id)
    for turn in transcript.turns:
        assert turn.status == "interrupted"
        for it in turn.iterations:
            assert it.status in ("ok", "interrupted")
            if it.status == "interrupted" and it.raw_reply is not None and len(it.blocks) < 3:
                assert it.running_block == len(it.blocks)
                assert it.planned_blocks[len(it.blocks)].startswith("a = ")
                cut_short += 1
            else:
                assert it.running_block is None
    return cut_short


def test_writers_killed_between_units_of_an_iteration_lose_no_unit(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    mid_iteration = 0
    for kill in range(KILLS):
        db = tmp_path / f"units-{kill}.db"
        lines = _kill_writer(db, rng, early=False, command="unit-writer")
        _check_units(db, lines)
        mid_iteration += asyncio.run(_check_interrupted_iterations(db))
    # Kills must land inside iterations too (after the reply, before the last block).
    assert mid_iteration >= 3
