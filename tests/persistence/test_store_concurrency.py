"""Two processes on one database (a SQLite file, a PostgreSQL database): nothing lost, and one
lease winner."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from cove.persistence.migrate import latest_version
from cove.persistence.store import Store

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


async def _written(database: str, conversation_ids: list[str]) -> dict[str, tuple[int, ...]]:
    """Per conversation: its finished iterations, their blocks and its variable versions."""
    found = {}
    async with Store.open(database) as store:
        assert store.schema_version == latest_version()
        for cid in conversation_ids:
            transcript = await store.transcript(cid)
            done = [
                it
                for turn in transcript.turns
                if turn.status == "done"
                for it in turn.iterations
                if it.status == "ok"
            ]
            blocks = sum(len(it.blocks) for it in done)
            found[cid] = (len(done), blocks, len(transcript.var_versions))
    return found


def test_two_processes_writing_different_conversations_lose_nothing(database: str) -> None:
    # Both start on a database that has no schema yet, so they also race to migrate it.
    children = [_spawn("writer", database, str(ITERATIONS)) for _ in range(2)]
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    conversation_ids = [out.strip() for out, _ in outputs]

    written = asyncio.run(_written(database, conversation_ids))
    expected = (ITERATIONS, ITERATIONS * 3, ITERATIONS * 2)  # iterations, blocks, versions
    assert written == dict.fromkeys(conversation_ids, expected)


async def _conversation(database: str) -> str:
    async with Store.open(database) as store:
        return (await store.create_conversation(channel="cli")).id


async def _holder(database: str, conversation_id: str) -> str | None:
    async with Store.open(database) as store:
        return (await store.get_conversation(conversation_id)).lease_owner


def test_two_processes_contending_for_one_lease_exactly_one_wins(database: str) -> None:
    conversation_id = asyncio.run(_conversation(database))
    children = [_spawn("lease", database, conversation_id, f"owner-{n}") for n in range(2)]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    for child in children:  # release both as close together as we can
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = sorted(child.communicate(timeout=30)[0].strip() for child in children)

    assert outcomes == ["busy", "won"]
    assert asyncio.run(_holder(database, conversation_id)) in ("owner-0", "owner-1")
