"""``cove serve --web --telegram`` end to end against the fake OpenAI and fake Bot API servers:
a Telegram turn watched live over the web's SSE, ``/metrics`` scraped, and a SIGTERM in the
middle of a Telegram turn that ends with it recorded ``cancelled`` and exit status 0.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.serve.process import FAKE_KEY, ServeProcess, serve_env
from tests.channels.serve.test_serve_process import metric, sse, wait_until_stopping
from tests.fakes import telegram_server
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove serve and cove processes

CHAT = 4242
GRACE_S = 1.0


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def tg() -> Iterator[Any]:
    with telegram_server.FakeTelegram() as server:
        yield server


async def telegram_conversation(client: httpx.AsyncClient) -> str:
    """The id of the conversation the bot created for the chat (it appears with the turn)."""
    while True:
        listed = (await client.get("/api/conversations")).json()
        rows = listed if isinstance(listed, list) else listed.get("conversations", [])
        for row in rows:
            if row.get("channel") == "telegram":
                return str(row["id"])
        await asyncio.sleep(0.05)  # another process creates it


async def test_serve_runs_telegram_and_web_together_and_stops_a_telegram_turn_cleanly(
    tmp_path: Path, fake: FakeOpenAI, tg: Any
) -> None:
    fake.add_replies(reply(["x = 6 * 7"], "x is {{x}}"))
    env = serve_env(tmp_path, fake) | {
        "TELEGRAM_BOT_TOKEN": tg.token,
        "COVE_TELEGRAM_API_URL": tg.api_url,
        "COVE_TELEGRAM_ALLOW": str(CHAT),
    }
    service = ServeProcess(env, "--web", "--telegram", "--grace", str(GRACE_S))
    try:
        async with service.client(timeout=60) as client:
            assert (await client.get("/healthz")).json()["channels"] == ["web", "telegram"]
            await tg.wait_for(lambda: tg.calls_of("getUpdates"))
            tg.send_text(CHAT, "what is six times seven?")
            cid = await telegram_conversation(client)
            first = await sse(client, cid, 0, "turn_finished")  # the bot's turn, seen in the web
            assert first[-1]["status"] == "done" and first[-1]["answer"] == "x is 42"
            await tg.wait_for(lambda: any("x is 42" in t for t in tg.texts(CHAT)))
            scrape = (await client.get("/metrics")).text
            assert metric(scrape, 'cove_turns_total{status="done"}') == 1
            assert metric(scrape, 'cove_channel_received_total{channel="telegram"}') == 1

            fake.add_faults(Fault.stall(120))
            fake.add_replies(reply(["y = 1"], "never"))
            calls = len(fake.requests)
            watching = asyncio.create_task(sse(client, cid, first[-1]["seq"], "turn_finished"))
            tg.send_text(CHAT, "and now?")
            while len(fake.requests) == calls:  # noqa: ASYNC110 (the model call is in flight)
                await asyncio.sleep(0.02)
            service.proc.send_signal(signal.SIGTERM)
            await wait_until_stopping(client)
            second = await watching
            assert second[-1]["status"] == "cancelled"
        assert await asyncio.to_thread(service.proc.wait, GRACE_S + 60) == 0
    finally:
        service.stop()

    with sqlite3.connect(tmp_path / "cove.db") as db:
        turns = db.execute("SELECT request, status FROM turn ORDER BY position").fetchall()
    assert turns == [("what is six times seven?", "done"), ("and now?", "cancelled")]
    logged = "\n".join(service.lines)
    assert FAKE_KEY not in logged and tg.token not in logged


async def test_stopping_serve_runs_no_queued_turn_and_tells_its_sender_to_resend(
    tmp_path: Path, fake: FakeOpenAI, tg: Any
) -> None:
    fake.add_faults(Fault.stall(120))
    fake.add_replies(reply(["y = 1"], "never"), reply(["z = 1"], "never either"))
    env = serve_env(tmp_path, fake) | {
        "TELEGRAM_BOT_TOKEN": tg.token,
        "COVE_TELEGRAM_API_URL": tg.api_url,
        "COVE_TELEGRAM_ALLOW": str(CHAT),
    }
    service = ServeProcess(env, "--web", "--telegram", "--grace", str(GRACE_S))
    try:
        await tg.wait_for(lambda: tg.calls_of("getUpdates"))
        tg.send_text(CHAT, "a long one")
        while not fake.requests:  # noqa: ASYNC110 (the first turn's model call is in flight)
            await asyncio.sleep(0.02)
        tg.send_text(CHAT, "and then this")
        await tg.wait_for(lambda: any("queued" in t for t in tg.texts(CHAT)))
        service.proc.send_signal(signal.SIGTERM)
        await tg.wait_for(lambda: any("send it again" in t for t in tg.texts(CHAT)), 60)
        assert await asyncio.to_thread(service.proc.wait, GRACE_S + 60) == 0
    finally:
        service.stop()

    with sqlite3.connect(tmp_path / "cove.db") as db:
        turns = db.execute("SELECT request, status FROM turn ORDER BY position").fetchall()
    assert turns == [("a long one", "cancelled")]  # the queued message never became a turn
    assert len(fake.requests) == 1
    texts = tg.texts(CHAT)
    assert any("did not run this message" in t for t in texts)
    # One status message, the first turn's: no "Working → Cancelled" for the queued message.
    assert [t for t in texts if t.startswith(("⚙️", "⏹"))] == [
        next(t for t in texts if t.startswith("⏹ Cancelled"))
    ]
