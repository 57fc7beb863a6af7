"""``cove serve --web`` end to end: a turn watched over SSE, metrics, health, and a SIGTERM
in the middle of a turn that ends with the turn recorded ``cancelled`` and exit status 0.

The same scenario through Telegram (``cove serve --web --telegram`` against the fake Bot API,
the Telegram turn watched over the web's SSE) joins this file with the Telegram channel.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.serve.process import FAKE_KEY, ServeProcess, serve_env
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove serve and cove processes

GRACE_S = 1.0
SECRET_REQUEST = "what is six times seven, privately"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


async def sse(client: httpx.AsyncClient, cid: str, after: int | None, until: str) -> list[Any]:
    """The conversation's events after ``after`` up to the first ``turn_finished``."""
    url = f"/api/conversations/{cid}/events" + (f"?after={after}" if after is not None else "")
    events: list[dict[str, Any]] = []
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        current: dict[str, Any] = {}
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                current = json.loads(line[6:])
            elif line == "" and current:
                events.append(current)
                if current["type"] == until:
                    return events
                current = {}
    return events


def metric(text: str, name: str) -> float:
    """The value of one sample line (``name`` includes its labels) of a scrape."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} is not in the scrape")


async def wait_until_stopping(client: httpx.AsyncClient) -> None:
    """Poll ``/readyz`` until the service says it is stopping (bounded by the test timeout)."""
    while (await client.get("/readyz")).json().get("status") != "stopping":  # noqa: ASYNC110
        await asyncio.sleep(0.05)


async def test_serve_runs_a_watched_turn_and_stops_mid_turn_with_it_cancelled(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.add_replies(reply(["x = 6 * 7"], "x is {{x}}"))
    service = ServeProcess(serve_env(tmp_path, fake), "--web", "--grace", str(GRACE_S))
    try:
        async with service.client(timeout=60) as client:
            assert (await client.get("/healthz")).json()["status"] == "ok"
            cid = (await client.post("/api/conversations", json={})).json()["id"]

            # A whole turn, watched over SSE.
            watching = asyncio.create_task(sse(client, cid, None, "turn_finished"))
            sent = await client.post(
                f"/api/conversations/{cid}/messages", json={"text": SECRET_REQUEST}
            )
            assert sent.status_code == 202
            first = await watching
            assert first[0]["type"] == "turn_started"
            assert first[-1]["status"] == "done" and first[-1]["answer"] == "x is 42"
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text

            scrape = (await client.get("/metrics")).text
            assert metric(scrape, 'cove_turns_total{status="done"}') == 1
            assert metric(scrape, "cove_iterations_total") == 1
            assert metric(scrape, 'cove_block_duration_seconds_count{ok="true"}') == 1
            assert metric(scrape, "cove_model_latency_seconds_count") == 1
            assert metric(scrape, 'cove_model_tokens_total{direction="in"}') > 0
            assert metric(scrape, "cove_live_environments") == 1
            assert metric(scrape, 'cove_workers{state="busy"}') == 1
            assert metric(scrape, "cove_turns_running") == 0

            # A second turn whose model call hangs; SIGTERM arrives in the middle of it.
            fake.add_faults(Fault.stall(120))
            fake.add_replies(reply(["y = 1"], "never"))
            calls = len(fake.requests)
            watching = asyncio.create_task(sse(client, cid, first[-1]["seq"], "turn_finished"))
            await client.post(f"/api/conversations/{cid}/messages", json={"text": "and now?"})
            while len(fake.requests) == calls:  # noqa: ASYNC110 (another process's progress)
                await asyncio.sleep(0.02)
            assert metric((await client.get("/metrics")).text, "cove_turns_running") == 1
            service.proc.send_signal(signal.SIGTERM)

            await wait_until_stopping(client)
            refused = await client.post(f"/api/conversations/{cid}/messages", json={"text": "late"})
            assert refused.status_code == 503
            second = await watching
            assert second[-1]["type"] == "turn_finished" and second[-1]["status"] == "cancelled"

        assert await asyncio.to_thread(service.proc.wait, GRACE_S + 60) == 0
    finally:
        service.stop()

    with sqlite3.connect(tmp_path / "cove.db") as db:
        turns = db.execute("SELECT request, status FROM turn ORDER BY position").fetchall()
        lease = db.execute("SELECT lease_owner FROM conversation").fetchone()
    assert turns == [(SECRET_REQUEST, "done"), ("and now?", "cancelled")]
    assert lease == (None,)

    records = service.records()
    logged = "\n".join(service.lines)
    assert FAKE_KEY not in logged and SECRET_REQUEST not in logged
    started = [r for r in records if r["msg"] == "turn started"]
    assert [(r["conversation_id"], r["turn"]) for r in started] == [(cid, 1), (cid, 2)]
    assert all(r["request_id"] for r in started)  # the request that sent each turn
    finished = [r for r in records if r["msg"] == "turn finished"]
    assert [(r["turn"], r["status"]) for r in finished] == [(1, "done"), (2, "cancelled")]
    assert any(r["msg"] == "stopping" for r in records) and records[-1]["msg"] == "stopped"


async def test_a_second_signal_exits_at_once_keeping_what_was_committed(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.add_replies(reply(["x = 1"], "done {{x}}"), reply(["y = 1"], "never"))
    service = ServeProcess(serve_env(tmp_path, fake), "--grace", "60")
    try:
        async with service.client(timeout=60) as client:
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            watching = asyncio.create_task(sse(client, cid, None, "turn_finished"))
            await client.post(f"/api/conversations/{cid}/messages", json={"text": "one"})
            await watching
            fake.add_faults(Fault.stall(120))  # the next model call hangs
            await client.post(f"/api/conversations/{cid}/messages", json={"text": "two"})
            while len(fake.requests) < 2:  # noqa: ASYNC110 (the second model call is in flight)
                await asyncio.sleep(0.02)
            service.proc.send_signal(signal.SIGTERM)
            await wait_until_stopping(client)  # the grace period of 60 s has begun
            service.proc.send_signal(signal.SIGINT)
            assert await asyncio.to_thread(service.proc.wait, 30) == 128 + signal.SIGINT
    finally:
        service.stop()

    with sqlite3.connect(tmp_path / "cove.db") as db:
        turns = db.execute("SELECT request, status, answer FROM turn ORDER BY position").fetchall()
        check = db.execute("PRAGMA integrity_check").fetchone()
    # The first turn is intact; the second was cut off running (the next open marks it
    # interrupted, as after a crash).
    assert turns == [("one", "done", "done 1"), ("two", "running", None)]
    assert check == ("ok",)


async def test_readyz_gives_its_details_only_to_a_logged_in_caller(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    token = "serve-readyz-token-0123456789"
    service = ServeProcess(serve_env(tmp_path, fake) | {"COVE_WEB_TOKEN": token}, "--web")
    try:
        assert token not in "\n".join(service.lines)  # a configured token is never printed
        async with httpx.AsyncClient(base_url=service.base_url, timeout=60) as anonymous:
            ready = await anonymous.get("/readyz")
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}
            assert (await anonymous.get("/healthz")).status_code == 200
            assert (await anonymous.get("/metrics")).status_code == 200
            assert (await anonymous.get("/api/conversations")).status_code == 401
            bearer = {"authorization": f"Bearer {token}"}
            detailed = await anonymous.get("/readyz", headers=bearer)
        async with service.client(timeout=60) as client:
            logged_in = await client.get("/readyz")
        for answer in (detailed, logged_in):
            assert answer.status_code == 200
            checks = {check["name"]: check for check in answer.json()["checks"]}
            assert str(tmp_path / "cove.db") in checks["database"]["detail"]
            assert all(check["ok"] for check in checks.values())
    finally:
        service.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(service.proc.wait, 60) == 0
        service.stop()


def open_files_of(pid: int) -> tuple[int, int]:
    """The soft and hard open-file limits of process ``pid`` (``/proc/PID/limits``)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-file limit listed")


def test_serve_raises_its_open_file_limit_for_its_connections(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    # A desktop's usual soft limit (1,024) would stop a busy service short of a thousand
    # clients: serve asks for as many as the hard limit allows.
    limited = ("prlimit", "--nofile=1024:8192", "--")
    service = ServeProcess(serve_env(tmp_path, fake), "--web", prefix=limited)
    try:
        assert open_files_of(service.proc.pid) == (8192, 8192)
    finally:
        service.proc.send_signal(signal.SIGTERM)
        assert service.proc.wait(60) == 0
        service.stop()
