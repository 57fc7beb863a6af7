"""``cove backup PATH`` copies the live database consistently while turns run."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cove.conversation import Conversations, scripted_factory
from tests.scripted import reply, settings_for

pytestmark = pytest.mark.slow  # cove serve and cove processes

CONVERSATIONS = 3
BACKUPS = 3


def closed_iterations(db: Path) -> dict[int, int]:
    """Iteration id -> block count of every closed (committed, final) iteration."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT i.id, (SELECT count(*) FROM block b WHERE b.iteration_id = i.id)"
            " FROM iteration i WHERE i.status != 'running'"
        ).fetchall()
    return dict(rows)


async def cove_backup(env: dict[str, str], target: Path) -> subprocess.CompletedProcess[bytes]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cove", "backup", str(target),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: os.umask(0o022),  # the usual umask, whatever the test runner's
    )  # fmt: skip
    out, err = await proc.communicate()
    return subprocess.CompletedProcess([], proc.returncode or 0, out, err)


async def test_backups_taken_while_turns_run_are_consistent_and_complete(tmp_path: Path) -> None:
    replies = [reply([f"v{i} = {i}", "total = sum(range(1000))"]) for i in range(3000)]
    settings = settings_for(tmp_path, max_iterations=500)
    db = Path(settings.store.database)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COVE_DB": settings.store.database}
    backups: list[tuple[dict[int, int], Path, subprocess.CompletedProcess[bytes]]] = []
    async with await Conversations.open(
        settings, llm_factory=scripted_factory(replies, delay_s=0.01)
    ) as convs:
        ids = [(await convs.create()).id for _ in range(CONVERSATIONS)]
        handles = [convs.send(cid, "keep going") for cid in ids]
        for _ in range(BACKUPS):
            before = await asyncio.to_thread(closed_iterations, db)
            while not before:  # the turns have committed something
                before = await asyncio.to_thread(closed_iterations, db)
            target = tmp_path / f"backup-{len(backups)}.db"
            backups.append((before, target, await cove_backup(env, target)))
        while len(await asyncio.to_thread(closed_iterations, db)) <= len(before):  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # the turns went on after the last backup began
        for cid in ids:
            await convs.cancel(cid)
        assert {(await h.finished()).status for h in handles} == {"cancelled"}

    final = closed_iterations(db)
    for before, target, result in backups:
        assert result.returncode == 0, result.stderr.decode()
        assert b"integrity ok" in result.stdout
        with sqlite3.connect(target) as copy:
            assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert copy.execute("PRAGMA foreign_key_check").fetchall() == []
        copied = closed_iterations(target)
        # Every iteration committed before the backup began is in it, with all its blocks;
        # every closed iteration in it is whole (as the live database holds it at the end).
        assert before.items() <= copied.items()
        assert all(final[i] == blocks for i, blocks in copied.items())
        assert len(copied) < len(final)  # a copy of the database as it was mid-run


async def test_backup_refuses_an_existing_target_and_a_missing_database(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COVE_DB": str(tmp_path / "none.db")}
    missing = await cove_backup(env, tmp_path / "copy.db")
    assert missing.returncode == 9 and b"no cove database" in missing.stderr
    assert not (tmp_path / "copy.db").exists() and not (tmp_path / "none.db").exists()

    settings = settings_for(tmp_path)
    async with await Conversations.open(settings) as convs:
        await convs.create()
    env["COVE_DB"] = settings.store.database
    (tmp_path / "taken.db").write_text("keep me")
    refused = await cove_backup(env, tmp_path / "taken.db")
    assert refused.returncode == 1 and b"already exists" in refused.stderr
    assert (tmp_path / "taken.db").read_text() == "keep me"


def mode(path: Path) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_copy_is_as_private_as_the_database(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    async with await Conversations.open(settings) as convs:
        await convs.create(title="private")
    db = Path(settings.store.database)
    assert mode(db) == 0o600
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COVE_DB": str(db)}
    copy = tmp_path / "copy.db"
    result = await cove_backup(env, copy)
    assert result.returncode == 0, result.stderr.decode()
    assert mode(copy) == 0o600
