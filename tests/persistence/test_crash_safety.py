"""Crash safety: a writer killed with SIGKILL at random moments never leaves a partial iteration.

A child process writes iterations (3 blocks + 2 variable versions each) in a loop and prints
each id once ``finish_iteration`` has returned. After every kill the database must pass
``integrity_check``, every reported iteration must be complete, and no iteration may be
half-written; reopening turns the running leftovers into ``interrupted`` ones.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from cove.persistence.store import Store
from tests.persistence.store_helpers import raw

WORKER = Path(__file__).with_name("store_worker.py")
KILLS = 24


def _run_and_kill(db: Path, rng: random.Random, early: bool) -> set[int]:
    """Start a writer, SIGKILL it at a random moment, return the ids it reported."""
    child = subprocess.Popen(
        [sys.executable, str(WORKER), "crash-writer", str(db)],
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
    return {int(line) for line in out.split() if line.isdigit()}


def _check_raw(db: Path, reported: set[int]) -> None:
    """What the killed writer left, before any cove code touches the file again."""
    with raw(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
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
