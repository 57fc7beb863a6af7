"""Several processes on one database: a ``cove serve``, ``cove run -c`` commands and a
``cove watch`` drive and follow the same conversations at once. Every request either runs
exactly once or is refused as busy (and leaves nothing behind); turns of one conversation never
overlap; the watcher sees every turn once, in order."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.channels.serve.process import ServeProcess, serve_env
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove serve and cove processes

TURNS_EACH = 3
EXIT_BUSY = 6


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.respond_with(reply(["n = 2 * 21"], "n is {{n}}"))
        yield server


def turn_of(db: Path, text: str) -> tuple[str, ...]:
    """Statuses of the turns whose request is ``text`` (read-only, another connection)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT status FROM turn WHERE request = ?", (text,)).fetchall()
    return tuple(row[0] for row in rows)


async def settled(service: ServeProcess, db: Path, text: str, request_id: str) -> str:
    """Wait until the web send ``text`` ran to its end ("done"), or was refused ("refused")."""
    while True:
        statuses = await asyncio.to_thread(turn_of, db, text)
        if statuses and "running" not in statuses:
            return "done"
        for line in list(service.lines):
            if request_id in line and '"turn refused"' in line:
                return "refused"
        await asyncio.sleep(0.05)


async def serve_side(
    client: httpx.AsyncClient, service: ServeProcess, db: Path, cid: str, outcomes: dict[str, str]
) -> None:
    for k in range(TURNS_EACH):
        text = f"web {cid[:6]} {k}"
        sent = await client.post(f"/api/conversations/{cid}/messages", json={"text": text})
        if sent.status_code == 409:  # refused before it started: the CLI runs a turn
            assert sent.json()["error"] == "Busy"
            outcomes[text] = "refused"
            continue
        assert sent.status_code == 202
        outcomes[text] = await settled(service, db, text, sent.headers["x-request-id"])


async def cli_side(env: dict[str, str], cid: str, outcomes: dict[str, str]) -> None:
    for k in range(TURNS_EACH):
        text = f"cli {cid[:6]} {k}"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cove", "run", "-c", cid, text,
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        _, err = await proc.communicate()
        assert proc.returncode in (0, EXIT_BUSY), err.decode()
        outcomes[text] = "done" if proc.returncode == 0 else "refused"
        if proc.returncode == EXIT_BUSY:
            assert b"busy" in err


def start_watcher(env: dict[str, str], cid: str) -> subprocess.Popen[str]:
    """``cove watch CID --events`` from the conversation's beginning, as another process."""
    return subprocess.Popen(
        [sys.executable, "-m", "cove", "watch", cid, "--events", "--after", "0"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def test_serve_cli_and_watcher_on_one_database_lose_nothing_and_run_nothing_twice(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    env = serve_env(tmp_path, fake)
    db = tmp_path / "cove.db"
    service = ServeProcess(env, "--web")
    watcher: subprocess.Popen[str] | None = None
    outcomes: dict[str, str] = {}
    try:
        async with service.client(timeout=60) as client:
            ids = [(await client.post("/api/conversations", json={})).json()["id"] for _ in "ab"]
            watcher = start_watcher(env, ids[0])
            await asyncio.gather(
                *(serve_side(client, service, db, cid, outcomes) for cid in ids),
                *(cli_side(env, cid, outcomes) for cid in ids),
            )
        service.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(service.proc.wait, 60) == 0

        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT conversation_id, position, request, status, started_at, finished_at, error"
                " FROM turn ORDER BY conversation_id, position"
            ).fetchall()
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        ran = [row[2] for row in rows]
        assert len(ran) == len(set(ran))  # nothing ran twice
        assert sorted(ran) == sorted(t for t, outcome in outcomes.items() if outcome == "done")
        assert [(row[2], row[3], row[6]) for row in rows if row[3] != "done"] == []
        assert any(t.startswith("web") for t in ran) and any(t.startswith("cli") for t in ran)
        for cid in ids:  # one conversation's turns follow each other, never overlapping
            mine = [row for row in rows if row[0] == cid]
            assert [row[1] for row in mine] == list(range(1, len(mine) + 1))
            assert all(a[5] <= b[4] for a, b in itertools.pairwise(mine))

        # The watcher (another process) saw every turn of its conversation once, in order.
        assert watcher.stdout is not None
        expected = [row[2] for row in rows if row[0] == ids[0]]
        started: list[str] = []
        seqs: list[int] = []
        while len(started) < len(expected):
            line = await asyncio.to_thread(watcher.stdout.readline)
            assert line, "the watcher stopped"
            event = json.loads(line)
            seqs.append(event["seq"])
            if event["type"] == "turn_started":
                started.append(event["request"])
        assert started == expected
        assert seqs == sorted(set(seqs))
    finally:
        service.stop()
        if watcher is not None:
            watcher.kill()
            watcher.wait(timeout=30)
            if watcher.stdout is not None:
                watcher.stdout.close()
