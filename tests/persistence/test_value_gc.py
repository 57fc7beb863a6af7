"""Collecting value chunks is crash-safe: a process killed with SIGKILL while it deletes
conversations and collects their chunks leaves every count true and every chunk a remaining
version reaches; the next open collects what it left."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cove.persistence.store import Store
from tests.persistence.store_helpers import raw
from tests.persistence.value_helpers import check_value_store, value_of, version, write_turn

pytestmark = pytest.mark.slow  # sandbox workers started per test

WORKER = Path(__file__).with_name("value_gc_worker.py")
SHARED = list(range(100_000))
DOOMED = 6


def own(k: int) -> list[int]:
    """A list only doomed conversation ``k`` holds (800 chunks of its own)."""
    return list(range(1_000_000 * (k + 1), 1_000_000 * (k + 1) + 200_000))


def kill_during_deletion(db: Path, rng: random.Random) -> list[str]:
    """Start the deleter, SIGKILL it a moment after it starts deleting; the lines it printed."""
    child = subprocess.Popen(
        [sys.executable, str(WORKER), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    first = child.stdout.readline()
    if first.startswith("deleting"):
        time.sleep(rng.uniform(0.0, 0.05))
        child.send_signal(signal.SIGKILL)
    out, err = child.communicate(timeout=60)
    assert child.returncode in (0, -signal.SIGKILL), err
    return [first.strip(), *out.split("\n")[:-1]]


def check_raw(db: Path) -> int:
    """What the killed process left, before cove opens the file again; how many chunks it left
    uncollected."""
    with raw(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        check_value_store(conn)
        return int(conn.execute("SELECT count(*) FROM value_ref WHERE refs = 0").fetchone()[0])


async def test_a_collection_killed_midway_loses_nothing_still_held(tmp_path: Path) -> None:
    db = tmp_path / "cove.db"
    async with Store.open(db) as store:
        kept = await store.create_conversation(channel="cli", title="kept")
        await write_turn(store, kept.id, version("shared", 1, SHARED))
        for k in range(DOOMED):
            doomed = await store.create_conversation(channel="cli", title="doomed")
            await write_turn(store, doomed.id, version("shared", 1, SHARED))
            await write_turn(store, doomed.id, version("own", 1, own(k)), version("tail", 1, [k]))
    rng = random.Random(25)
    rounds, cut_short = 0, 0
    while True:
        lines = kill_during_deletion(db, rng)
        left = check_raw(db)
        cut_short += left > 0
        rounds += 1
        if lines[-1] == "done" or rounds == 8:
            break
    async with Store.open(db) as store:  # opening collects what a killed collection left
        assert await value_of(store, kept.id, "shared", 1) == SHARED
        survivors = [c for c in await store.list_conversations() if c.title == "doomed"]
        for conversation in survivors:  # a deletion the kill cut short was rolled back whole
            assert await value_of(store, conversation.id, "shared", 1) == SHARED
            own_value = await value_of(store, conversation.id, "own", 1)
            assert own_value[:1] == [own_value[0]] and len(own_value) == 200_000
        stats = await store.value_stats()
    assert cut_short >= 1  # a kill landed between a release and the end of its collection
    assert stats["garbage"] == 0
    with raw(db) as conn:
        check_value_store(conn)
