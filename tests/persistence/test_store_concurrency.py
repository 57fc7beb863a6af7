"""Two processes on one database file: nothing lost, and one lease winner."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from cove.persistence.migrate import latest_version
from cove.persistence.store import Store
from tests.persistence.store_helpers import raw

WORKER = Path(__file__).with_name("store_worker.py")
ITERATIONS = 500


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_writing_different_conversations_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    # Both start on a file that does not exist yet, so they also race to migrate it.
    children = [_spawn("writer", str(db), str(ITERATIONS)) for _ in range(2)]
    outputs = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    conversation_ids = [out.strip() for out, _ in outputs]

    with raw(db) as conn:
        per_conversation = dict(
            conn.execute(
                """
                SELECT t.conversation_id, count(DISTINCT i.id) || '/' || count(b.id)
                FROM turn t JOIN iteration i ON i.turn_id = t.id
                JOIN block b ON b.iteration_id = i.id
                WHERE i.status = 'ok' AND t.status = 'done'
                GROUP BY t.conversation_id
                """
            ).fetchall()
        )
        versions = dict(
            conn.execute(
                "SELECT conversation_id, count(*) FROM var_version GROUP BY conversation_id"
            ).fetchall()
        )
        migrations = conn.execute("SELECT version FROM schema_migrations").fetchall()
    assert per_conversation == {cid: f"{ITERATIONS}/{ITERATIONS * 3}" for cid in conversation_ids}
    assert versions == {cid: ITERATIONS * 2 for cid in conversation_ids}
    assert migrations == [(v,) for v in range(1, latest_version() + 1)]


async def _conversation(db: Path) -> str:
    async with Store.open(db) as store:
        return (await store.create_conversation(channel="cli")).id


def test_two_processes_contending_for_one_lease_exactly_one_wins(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    conversation_id = asyncio.run(_conversation(db))
    children = [_spawn("lease", str(db), conversation_id, f"owner-{n}") for n in range(2)]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    for child in children:  # release both as close together as we can
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = sorted(child.communicate(timeout=30)[0].strip() for child in children)

    assert outcomes == ["busy", "won"]
    with raw(db) as conn:
        owner = conn.execute("SELECT lease_owner FROM conversation").fetchone()[0]
    assert owner in ("owner-0", "owner-1")
